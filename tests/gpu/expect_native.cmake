# PLAB_REQUIRE_NATIVE=1 must turn "no native GPU" into a failing test:
#
#   cmake -DTEST_BIN=<the test binary holding CASE> -DCASE="<Catch2 case>" -P expect_native.cmake
#
# 1. Runs CASE without the variable: it must pass, and its WARN lines say
#    whether a "(native)" form exists here.
# 2. Runs CASE with PLAB_REQUIRE_NATIVE=1. Without a native form it must FAIL
#    and say "PLAB_REQUIRE_NATIVE=1, but the GPU backends would run emulated"
#    with one of the three reasons; with one it must pass.
foreach(_v TEST_BIN CASE)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "expect_native.cmake: -D${_v}=... is required")
  endif()
endforeach()

execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=PLAB_REQUIRE_NATIVE "${TEST_BIN}" "${CASE}"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "'${CASE}' failed without PLAB_REQUIRE_NATIVE:\n${_out}")
endif()
string(FIND "${_out}" "gpu_backend_forms: gpu-ref (native)" _native)

execute_process(COMMAND ${CMAKE_COMMAND} -E env PLAB_REQUIRE_NATIVE=1 "${TEST_BIN}" "${CASE}"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
message("${_out}")
if(NOT _native EQUAL -1)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "a native form exists, yet PLAB_REQUIRE_NATIVE=1 failed the case")
  endif()
  message("native form present: PLAB_REQUIRE_NATIVE=1 passed, as it must")
  return()
endif()
if(_rc EQUAL 0)
  message(FATAL_ERROR "no native form here, yet PLAB_REQUIRE_NATIVE=1 let '${CASE}' pass "
                      "(it fell back to emulation)")
endif()
# Catch2 wraps long messages at 80 columns: rejoin before looking for the line.
string(REGEX REPLACE "[ \n]+" " " _flat "${_out}")
set(_said "PLAB_REQUIRE_NATIVE=1, but the GPU backends would run emulated: built with")
string(FIND "${_flat}" "${_said} CUDA, but " _a)   # no device, or a CUDA error (driver)
string(FIND "${_flat}" "${_said}out nvcc" _b)      # built without CUDA
if(_a EQUAL -1 AND _b EQUAL -1)
  message(FATAL_ERROR "PLAB_REQUIRE_NATIVE=1 failed the case, but without the line naming why")
endif()
message("no native form: PLAB_REQUIRE_NATIVE=1 failed the case with the reason, as it must")
