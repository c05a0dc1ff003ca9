# The one forward pass reads like a narrated forward (issue 44, part 3):
#   cmake -DFILE=<src/runtime/forward.cpp> -P check_forward.cmake
# `forward_step`, from its signature to its closing brace, is at most 90 lines
# (llama2.c's `forward` is 110), and its layer loop calls the ops of a Llama
# layer in the order lesson 2 teaches them. Step planning, probes and tracing
# live in named helpers beside it. Fails with one line saying what moved.
cmake_minimum_required(VERSION 3.20)
if(NOT DEFINED FILE)
  message(FATAL_ERROR "check_forward.cmake: pass -DFILE=<src/runtime/forward.cpp>")
endif()
set(MAX_LINES 90)
macro(fail)  # the reason on one unwrapped line, then the failure
  string(CONCAT _why ${ARGN})
  message(NOTICE "${_why}")
  message(FATAL_ERROR "forward_step is not a narrated forward (see the line above)")
endmacro()
file(STRINGS "${FILE}" _lines)
set(_in FALSE)
set(_body "")
set(_n 0)
foreach(_l IN LISTS _lines)
  if(NOT _in AND _l MATCHES "^ChunkOutput forward_step\\(")
    set(_in TRUE)
  endif()
  if(_in)
    math(EXPR _n "${_n} + 1")
    string(APPEND _body "${_l}\n")
    if(_l STREQUAL "}")
      break()
    endif()
  endif()
endforeach()
if(_n EQUAL 0)
  fail("${FILE}: no 'ChunkOutput forward_step(' definition found")
endif()
if(_n GREATER MAX_LINES)
  fail("${FILE}: forward_step is ${_n} lines, more than ${MAX_LINES}: move "
                      "bookkeeping into a named helper, keep the layer loop readable")
endif()
# The narrated order: embedding, per layer norm -> Q/K/V -> RoPE and append
# (one call: a backend may fuse them) -> attention -> output -> residual +
# norm -> gate/up with SwiGLU (one call) -> down -> residual, then the final
# norm and the classifier.
set(_order "be.embed(" "be.rmsnorm(" "for (int l = 0; l < c.n_layers; ++l)" "be.matmul_parts(ws.xb.buf(), n, D, qkv)"
           "be.rope_kv_append(" "be.attention_batch("
           "be.matmul(ws.proj.buf(), ws.att.buf()" "be.add_rmsnorm(" "be.matmul_swiglu("
           "be.matmul(ws.proj.buf(), ws.gate.buf()" "final_norm_rows(" "model.classifier_buf()")
set(_at 0)
set(_prev "the start")
foreach(_step IN LISTS _order)
  string(SUBSTRING "${_body}" ${_at} -1 _rest)
  string(FIND "${_rest}" "${_step}" _k)
  if(_k EQUAL -1)
    fail("${FILE}: forward_step does not call '${_step}' after '${_prev}': "
                        "the layer loop must read in the order lesson 2 teaches")
  endif()
  math(EXPR _at "${_at} + ${_k} + 1")
  set(_prev "${_step}")
endforeach()
list(LENGTH _order _n_steps)
message(STATUS "forward_step: ${_n} lines (at most ${MAX_LINES}), its ${_n_steps} steps in order")
