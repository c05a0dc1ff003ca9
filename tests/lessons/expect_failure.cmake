# Proves the lesson runner can fail: runs it over a lesson that must be
# rejected and passes only if the runner exits 1 with the expected reason.
#
#   cmake -DRUNNER=... -DBIN_DIR=... -DLESSON=file.md -DEXPECT="text"
#         [-DFROM="old" -DTO="new" -DSCRATCH=dir] [-DSTRICT=ON] -P expect_failure.cmake
#
# STRICT=ON runs the runner with --strict (the rules of lessons/NN-*.md).
# With FROM/TO, the runner reads a scratch copy of LESSON in which every FROM
# is replaced by TO (a real lesson with one number changed). FROM must occur
# in the lesson, so a mutation cannot silently go stale when the lesson moves.
# The copy ends with the console block that holds the first FROM: later
# blocks (a benchmark, say) cost time and cannot change the verdict.
foreach(_v RUNNER BIN_DIR LESSON EXPECT)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "expect_failure.cmake: -D${_v}=... is required")
  endif()
endforeach()

set(_lesson "${LESSON}")
if(DEFINED FROM)
  file(READ "${LESSON}" _text)
  string(FIND "${_text}" "${FROM}" _at)
  if(_at EQUAL -1)
    message(FATAL_ERROR "'${FROM}' does not occur in ${LESSON}: update this mutation test")
  endif()
  string(SUBSTRING "${_text}" ${_at} -1 _tail)
  string(FIND "${_tail}" "\n```\n" _close)
  if(NOT _close EQUAL -1)
    math(EXPR _end "${_at} + ${_close} + 5")
    string(SUBSTRING "${_text}" 0 ${_end} _text)
  endif()
  string(REPLACE "${FROM}" "${TO}" _text "${_text}")
  get_filename_component(_name "${LESSON}" NAME)
  file(MAKE_DIRECTORY "${SCRATCH}")
  set(_lesson "${SCRATCH}/${_name}")
  file(WRITE "${_lesson}" "${_text}")
endif()

set(_strict)
if(STRICT)
  set(_strict --strict)
endif()
execute_process(COMMAND "${RUNNER}" ${_strict} "${BIN_DIR}" "${_lesson}"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
message("${_err}${_out}")
if(NOT _rc EQUAL 1)
  message(FATAL_ERROR "lesson runner exited with '${_rc}' on ${_lesson}; expected 1 (rejected)")
endif()
string(FIND "${_err}${_out}" "${EXPECT}" _found)
if(_found EQUAL -1)
  message(FATAL_ERROR "lesson runner rejected ${_lesson}, but without saying '${EXPECT}'")
endif()
message("rejected as expected: '${EXPECT}'")
