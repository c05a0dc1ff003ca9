# The test of the layering check: copies src/ and kernels/ into SCRATCH, adds
# one include that breaks a rule, runs check_includes.cmake on the copy and
# requires it to fail naming the break. The real tree is never touched.
#   cmake -DROOT=<repo> -DSCRATCH=<dir>
#         -DCASE=loop|backends_to_kernels|kernels_to_backends|engine_to_serving|runtime_to_perf|
#                cli_to_backend|viewer_to_kernels|viewer_app_to_panels|spec_name
#         -P selftest.cmake
cmake_minimum_required(VERSION 3.20)
foreach(_v ROOT SCRATCH CASE)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "selftest.cmake: pass -D${_v}=...")
  endif()
endforeach()

# CASE -> the file that gets one more include, the include, what the check must say.
if(CASE STREQUAL "loop")
  # The loop issue 18 removed: the checkpoint header needing the model loader again.
  set(_file "src/model/llama2c.h")
  set(_include "model/model_io.h")
  set(_expect "include loop inside src/: [^\n]*src/model/llama2c -> src/model/model_io")
elseif(CASE STREQUAL "backends_to_kernels")
  set(_file "src/backends/cpu_ref.h")
  set(_include "kernels.h")
  set(_expect "src/backends/cpu_ref.h -> kernels/kernels.h: src/backends/ and kernels/ must not")
elseif(CASE STREQUAL "kernels_to_backends")
  set(_file "kernels/add.cu")
  set(_include "backends/cpu_ref.h")
  set(_expect "kernels/add.cu -> src/backends/cpu_ref.h: src/backends/ and kernels/ must not")
elseif(CASE STREQUAL "engine_to_serving")
  # The back edge issue 44 removed: the engine naming the serving lab's cost model.
  set(_file "src/runtime/engine.h")
  set(_include "serving/step_cost.h")
  set(_expect "src/runtime/engine.h -> src/serving/step_cost.h: the engine must not include a client")
elseif(CASE STREQUAL "runtime_to_perf")
  set(_file "src/runtime/session.cpp")
  set(_include "perf/machine.h")
  set(_expect "src/runtime/session.cpp -> src/perf/machine.h: the engine must not include a client")
elseif(CASE STREQUAL "cli_to_backend")
  # What cmd_info.cpp did before issue 44: a command naming the fast backend.
  set(_file "src/cli/cmd_info.cpp")
  set(_include "backends/cpu_fast/cpu_fast.h")
  set(_expect "src/cli/cmd_info.cpp -> src/backends/cpu_fast/cpu_fast.h: a client")
elseif(CASE STREQUAL "perf_to_backend")
  set(_file "src/perf/machine.h")
  set(_include "backends/cpu_ref.h")
  set(_expect "src/perf/machine.h -> src/backends/cpu_ref.h: a client")
elseif(CASE STREQUAL "spec_name")
  # A file named for its role in a test suite, not for what it holds.
  set(_file "src/runtime/mask_grammar.h")
  set(_include "core/mask.h")
  set(_rename "src/runtime/mask_spec.h")
  set(_expect "src/runtime/mask_spec.h: a source file named \\*_spec or \\*_test")
elseif(CASE STREQUAL "viewer_app_to_panels")
  # The back arrow the third floor plan removed: the app's state needing a panel.
  set(_file "viewer/app/controller.cpp")
  set(_include "panels/panels.h")
  set(_expect "viewer/app/controller.cpp -> viewer/panels/panels.h: viewer/app and viewer/checks must not")
elseif(CASE STREQUAL "viewer_to_kernels")
  set(_file "viewer/app/controller.cpp")
  set(_include "gpu_backend.h")
  set(_expect "viewer/app/controller.cpp -> kernels/gpu_backend.h: a client")
else()
  message(FATAL_ERROR "selftest.cmake: unknown CASE ${CASE}")
endif()

file(REMOVE_RECURSE "${SCRATCH}")
file(MAKE_DIRECTORY "${SCRATCH}")
file(COPY "${ROOT}/src" "${ROOT}/kernels" "${ROOT}/viewer" DESTINATION "${SCRATCH}")
if(NOT EXISTS "${SCRATCH}/${_file}")
  message(FATAL_ERROR "selftest.cmake: ${_file} is gone; pick another file for CASE ${CASE}")
endif()
file(APPEND "${SCRATCH}/${_file}" "\n#include \"${_include}\"\n")
if(DEFINED _rename)
  file(RENAME "${SCRATCH}/${_file}" "${SCRATCH}/${_rename}")
endif()

# First the untouched copy passes (so the failure below is the injected include's).
execute_process(COMMAND "${CMAKE_COMMAND}" -DROOT=${ROOT} -P "${CMAKE_CURRENT_LIST_DIR}/check_includes.cmake"
                RESULT_VARIABLE _rc0 OUTPUT_VARIABLE _out0 ERROR_VARIABLE _out0)
if(NOT _rc0 EQUAL 0)
  message(FATAL_ERROR "the real tree fails the layering check, so this test proves nothing:\n${_out0}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -DROOT=${SCRATCH} -P "${CMAKE_CURRENT_LIST_DIR}/check_includes.cmake"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
file(REMOVE_RECURSE "${SCRATCH}")
if(_rc EQUAL 0)
  message(FATAL_ERROR "CASE ${CASE}: ${_file} + #include \"${_include}\" passed the layering check:\n${_out}")
endif()
if(NOT _out MATCHES "${_expect}")
  message(FATAL_ERROR "CASE ${CASE}: the check failed but did not say /${_expect}/:\n${_out}")
endif()
message(STATUS "CASE ${CASE}: ${_file} + #include \"${_include}\" is caught:\n${_out}")
