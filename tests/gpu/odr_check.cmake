cmake_minimum_required(VERSION 3.25)
# The native (nvcc) and emulated (g++) builds of kernels/ are linked into one
# program. A function of namespace plab::simt that both compile from one text
# under one mangled name is merged by the linker into one copy, silently: on
# the H200 the native flash kernel's shared-memory opt-in ran the emulator's
# copy of reserve_shared_memory and its launch failed. This check lists the
# plab::simt functions each archive defines and fails on any name in both.
function(simt_symbols archive out)
  execute_process(COMMAND ${NM} -C --defined-only ${archive}
                  OUTPUT_VARIABLE text RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm failed on ${archive}")
  endif()
  string(REPLACE "\n" ";" lines "${text}")
  set(names "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[0-9a-f]+ [TWV] (.*plab::simt::.*)$")
      list(APPEND names "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES names)
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

simt_symbols(${NATIVE} native)
simt_symbols(${EMULATED} emulated)
list(LENGTH native n_native)
list(LENGTH emulated n_emulated)
if(n_native EQUAL 0 OR n_emulated EQUAL 0)
  message(FATAL_ERROR "no plab::simt functions found (native ${n_native}, emulated ${n_emulated}): "
                      "the check would prove nothing")
endif()
set(both "")
foreach(name IN LISTS native)
  if(name IN_LIST emulated)
    list(APPEND both "${name}")
  endif()
endforeach()
if(both)
  string(REPLACE ";" "\n  " shown "${both}")
  message(FATAL_ERROR "defined by both the native and the emulated build under one name "
                      "(the linker keeps one copy for both): put it in the build's inline "
                      "namespace (PLAB_SIMT_NS, kernels/simt/simt.h):\n  ${shown}")
endif()
message("plab::simt: ${n_native} native and ${n_emulated} emulated functions, none shared")
