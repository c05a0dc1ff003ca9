# Runs `plab grade ASSIGNMENT FILE` and checks how it ends (tests/assignments/CMakeLists.txt).
#   -DPLAB=... -DASSIGNMENT=... -DFILE=... -DEXIT=0|1 "-DEXPECT=regex;regex..." [-DREJECT=regex]
#   ["-DARGS=--cxx PATH"] (more arguments of plab grade, separated by spaces)
#   [-DGRADE_ENV=NAME=VALUE] [-DMUTATION=file.mutation -DPYTHON=... -DMUTATE=mutate.py -DSCRATCH=dir] [-DTEMP=dir]
# Every EXPECT regex must match the output (stdout and stderr together), REJECT must
# not; the exit code must be EXIT. With MUTATION, FILE (a reference solution, .py or
# .cpp) is graded with the mutation's edits applied (mutate.py): a planted mistake.
# With TEMP, plab runs with TMPDIR=TEMP (emptied first), which must be empty again
# after it: the grader's temporary files and C++ build cleaned up.
if(DEFINED MUTATION)
  get_filename_component(_name "${MUTATION}" NAME_WE)
  get_filename_component(_ext "${FILE}" LAST_EXT)
  file(MAKE_DIRECTORY "${SCRATCH}")
  set(_planted "${SCRATCH}/${_name}${_ext}")
  execute_process(COMMAND ${PYTHON} ${MUTATE} ${FILE} ${MUTATION} ${_planted}
                  RESULT_VARIABLE _mrc ERROR_VARIABLE _merr)
  if(NOT _mrc EQUAL 0)
    message(FATAL_ERROR "${MUTATION} does not apply to ${FILE}: ${_merr}")
  endif()
  set(FILE "${_planted}")
endif()
separate_arguments(_args UNIX_COMMAND "${ARGS}")
set(_env)
if(DEFINED GRADE_ENV)
  set(_env ${CMAKE_COMMAND} -E env ${GRADE_ENV})
endif()
if(DEFINED TEMP)
  file(REMOVE_RECURSE "${TEMP}")
  file(MAKE_DIRECTORY "${TEMP}")
  set(_env ${CMAKE_COMMAND} -E env ${GRADE_ENV} TMPDIR=${TEMP})
endif()
execute_process(COMMAND ${_env} ${PLAB} grade ${ASSIGNMENT} ${FILE} ${_args}
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
if(DEFINED TEMP)
  file(GLOB _left "${TEMP}/*")
  if(_left)
    message(FATAL_ERROR "plab grade ${ASSIGNMENT} ${FILE} left files in TMPDIR: ${_left}")
  endif()
endif()
message(STATUS "plab grade ${ASSIGNMENT} ${FILE}: exit ${_rc} as expected")
