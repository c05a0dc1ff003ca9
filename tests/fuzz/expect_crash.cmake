# The test of the replay: fuzz_replay_selftest over an input it aborts on must
# die of that abort (not exit 0, and not refuse its arguments with exit 2).
#   cmake -DREPLAY=<exe> -DINPUT=<file> -P expect_crash.cmake
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND ${REPLAY} ${INPUT} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out
                ERROR_VARIABLE _out)
if(NOT _rc MATCHES "[Aa]bort")
  message(FATAL_ERROR "replay of a crashing input ended with '${_rc}', expected an abort:\n${_out}")
endif()
if(NOT _out MATCHES "replay [^\n]*replay_selftest.cpp")
  message(FATAL_ERROR "the replay did not name the input it was running:\n${_out}")
endif()
message(STATUS "the replay failed on the crashing input, as it must: ${_rc}")
