# The grader's table of assignments against the folders of lessons/assignments/:
#   cmake -DPLAB=<plab> -DALL="a, b, c" -DCPP="a, b" -P table_matches_folders.cmake
# `plab grade --help` lists the table's names (and those with a C++ variant);
# as sets they must equal the folders (ALL) and those with a cpp_adapter.py (CPP).
cmake_minimum_required(VERSION 3.20)
execute_process(COMMAND ${PLAB} grade --help OUTPUT_VARIABLE _help RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "plab grade --help exited ${_rc}")
endif()
# "assignment TEXT REQUIRED    attention, rope, ... or chunked_prefill (lessons/assignments/)"
string(REGEX MATCH "assignment TEXT REQUIRED +([^(\n]+) \\(lessons/assignments/\\)" _m "${_help}")
set(_table "${CMAKE_MATCH_1}")
string(REGEX MATCH "C\\+\\+ variant \\(([^)]+)\\)" _m "${_help}")
set(_table_cpp "${CMAKE_MATCH_1}")
foreach(_pair "_table;ALL" "_table_cpp;CPP")
  list(GET _pair 0 _got_var)
  list(GET _pair 1 _want_var)
  string(REPLACE " or " ", " _got "${${_got_var}}")
  string(REPLACE ", " ";" _got "${_got}")
  string(REPLACE ", " ";" _want "${${_want_var}}")
  list(SORT _got)
  list(SORT _want)
  if(NOT _got STREQUAL _want)
    message(FATAL_ERROR "the grader's table names '${_got}' but lessons/assignments/ has "
                        "'${_want}' (${_want_var}): add the row to grade::assignments() "
                        "(src/cli/cmd_grade.cpp) or the folder, so they agree")
  endif()
endforeach()
message(STATUS "the grader's table and lessons/assignments/ agree: ${ALL} (C++: ${CPP})")
