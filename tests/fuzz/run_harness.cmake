# One fuzz.<name> ctest entry: runs a libFuzzer harness for a bounded time.
#   cmake -DHARNESS=<exe> -DNAME=<name> -DWORK=<dir> "-DINPUTS=<dir>;<dir>" -P run_harness.cmake
# $PLAB_FUZZ_SECONDS (default 20) bounds the run; `make fuzz` raises it.
# The first corpus directory libFuzzer gets is the scratch work/<name>/ (new
# inputs go there, never into the committed seeds); the seeds and crashers
# follow, and libFuzzer runs all of them before it starts mutating.
cmake_minimum_required(VERSION 3.25)
set(_seconds 20)
if(DEFINED ENV{PLAB_FUZZ_SECONDS})
  set(_seconds $ENV{PLAB_FUZZ_SECONDS})
endif()
if(NOT _seconds MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "PLAB_FUZZ_SECONDS='${_seconds}': expected a whole number of seconds >= 1")
endif()
file(MAKE_DIRECTORY ${WORK}/work/${NAME} ${WORK}/crashes)
execute_process(
  COMMAND ${HARNESS} -max_total_time=${_seconds} -timeout=10 -rss_limit_mb=2048
          -print_final_stats=1 -artifact_prefix=${WORK}/crashes/${NAME}-
          ${WORK}/work/${NAME} ${INPUTS}
  RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "fuzz.${NAME}: the harness found a crash (exit ${_rc}); the input is in "
                      "${WORK}/crashes/ (fix the parser, then commit the input under "
                      "tests/fuzz/regressions/${NAME}/)")
endif()
message(STATUS "fuzz.${NAME}: ${_seconds} s without a crash")
