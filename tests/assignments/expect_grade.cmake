# Runs `plab grade ASSIGNMENT FILE` and checks how it ends (tests/assignments/CMakeLists.txt).
#   -DPLAB=... -DASSIGNMENT=... -DFILE=... -DEXIT=0|1 "-DEXPECT=regex;regex..." [-DREJECT=regex]
# Every EXPECT regex must match the output (stdout and stderr together), REJECT must
# not; the exit code must be EXIT.
execute_process(COMMAND ${PLAB} grade ${ASSIGNMENT} ${FILE}
                OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc)
set(_all "${_out}${_err}")
if(NOT _rc STREQUAL EXIT)
  message(FATAL_ERROR "plab grade ${ASSIGNMENT} ${FILE}: exit ${_rc}, expected ${EXIT}\n${_all}")
endif()
foreach(_re IN LISTS EXPECT)
  if(NOT _all MATCHES "${_re}")
    message(FATAL_ERROR "plab grade ${ASSIGNMENT} ${FILE}: no match for '${_re}' in\n${_all}")
  endif()
endforeach()
if(DEFINED REJECT AND _all MATCHES "${REJECT}")
  message(FATAL_ERROR "plab grade ${ASSIGNMENT} ${FILE}: '${REJECT}' must not appear in\n${_all}")
endif()
message(STATUS "plab grade ${ASSIGNMENT} ${FILE}: exit ${_rc} as expected")
