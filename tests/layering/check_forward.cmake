# The one forward pass reads like a narrated forward:
#   cmake -DFILE=<src/runtime/forward.cpp> -P check_forward.cmake
# `run_layers` is the numbered layer loop a lecturer puts on one slide (at most
# 90 lines from its signature to its closing brace; llama2.c's `forward` is
# 110), calling the ops of a Llama layer in the order lesson 2 teaches them, and
# `classify` the final norm and classifier after it. `forward_step` is the
# frame around them (at most 30 lines): the CUDA-graph scope, the layer watch
# (trace and probes) and the copy back wrap the loop from outside. Fails with one
# line saying what moved.
cmake_minimum_required(VERSION 3.20)
if(NOT DEFINED FILE)
  message(FATAL_ERROR "check_forward.cmake: pass -DFILE=<src/runtime/forward.cpp>")
endif()
macro(fail)  # the reason on one unwrapped line, then the failure
  string(CONCAT _why ${ARGN})
  message(NOTICE "${_why}")
  message(FATAL_ERROR "forward_step is not a narrated forward (see the line above)")
endmacro()
file(STRINGS "${FILE}" _lines)

# The text of the definition whose first line matches `regex`, up to the first
# line that is only "}", and its line count.
function(body_of regex out_body out_n)
  set(_in FALSE)
  set(_body "")
  set(_n 0)
  foreach(_l IN LISTS _lines)
    if(NOT _in AND _l MATCHES "${regex}")
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
  set(${out_body} "${_body}" PARENT_SCOPE)
  set(${out_n} ${_n} PARENT_SCOPE)
endfunction()

# Each step must come after the previous one in `text`.
function(check_order what text)
  set(_at 0)
  set(_prev "the start")
  foreach(_step IN LISTS ARGN)
    string(SUBSTRING "${text}" ${_at} -1 _rest)
    string(FIND "${_rest}" "${_step}" _k)
    if(_k EQUAL -1)
      fail("${FILE}: ${what} does not call '${_step}' after '${_prev}': "
           "the forward must read in the order lesson 2 teaches")
    endif()
    math(EXPR _at "${_at} + ${_k} + 1")
    set(_prev "${_step}")
  endforeach()
endfunction()

set(_checked "")
foreach(_f "run_layers:^void run_layers\\(:90" "classify:^int classify\\(:30"
           "forward_step:^StepOutput forward_step\\(:30")
  string(REPLACE ":" ";" _parts "${_f}")
  list(GET _parts 0 _name)
  list(GET _parts 1 _regex)
  list(GET _parts 2 _max)
  body_of("${_regex}" _body_${_name} _n)
  if(_n EQUAL 0)
    fail("${FILE}: no '${_name}(' definition found")
  endif()
  if(_n GREATER _max)
    fail("${FILE}: ${_name} is ${_n} lines, more than ${_max}: move bookkeeping into a "
         "named helper, keep the layer loop readable")
  endif()
  string(APPEND _checked "${_name} ${_n} lines (at most ${_max}); ")
endforeach()

# The narrated order: embedding, per layer norm -> Q/K/V -> RoPE and append
# (one call: a backend may fuse them) -> attention -> output -> residual +
# norm -> gate/up with SwiGLU (one call) -> down -> residual; then the final
# norm and the classifier; and the frame: the layers, the classifier, the copy.
check_order(run_layers "${_body_run_layers}"
            "be.embed(" "be.rmsnorm(" "for (int l = 0; l < c.n_layers; ++l)"
            "be.matmul_parts(ws.xb.buf(), n, D, qkv)" "be.rope_kv_append(" "be.attention_batch("
            "be.matmul(ws.proj.buf(), ws.att.buf()" "be.add_rmsnorm(" "be.matmul_swiglu("
            "be.matmul(ws.proj.buf(), ws.gate.buf()")
check_order(classify "${_body_classify}" "final_norm_rows(" "model.classifier_buf()")
check_order(forward_step "${_body_forward_step}" "StepGraphScope graph(" "run_layers("
            "classify(" "graph.end()" "copy_logits_to_host(")
message(STATUS "${_checked}the layer loop's steps in order")
