# Tests where one looks: every test executable builds exactly one test file and
# is named after it (test_X builds test_X.cpp, beside non-test helpers), and
# every tests/**/test_*.cpp is the test file of one executable, so a reader who
# knows a binary's name knows the file its cases are in, and back.
#   cmake -DTARGETS="name=dir/file1.cpp,dir/file2.cpp;..." [-DSHARED=file,...]
#         [-DROOT=<tests dir>] [-DNOT_CONFIGURED=dir;...] -P check_test_files.cmake
# TARGETS    each Catch2 executable (plab_add_test) with the sources it compiles,
#            as paths relative to ROOT;
# SHARED     the sources of the shared main library (plab_test_main), relative to
#            ROOT: its test_main.cpp and test_util.cpp are the runner and helpers
#            of every binary, not test files of one;
# ROOT       the tests folder, searched for test_*.cpp (fixtures/ and golden/
#            skipped); without it only TARGETS is checked;
# NOT_CONFIGURED  folders under ROOT this build does not configure (the viewer's
#            tests without the viewer): their files are not looked for.
cmake_minimum_required(VERSION 3.20)
set(_problems "")
set(_names "")
set(_test_files "")  # the one test file of each executable, path relative to ROOT
foreach(_entry IN LISTS TARGETS)
  string(REGEX MATCH "^([^=]+)=(.*)$" _m "${_entry}")
  set(_t "${CMAKE_MATCH_1}")
  list(APPEND _names "${_t}")
  string(REPLACE "," ";" _files "${CMAKE_MATCH_2}")
  set(_own "")
  foreach(_f IN LISTS _files)
    get_filename_component(_file "${_f}" NAME)
    if(_file MATCHES "^test_.*\\.(cpp|cc|cxx)$")
      list(APPEND _own "${_f}")
    endif()
  endforeach()
  list(LENGTH _own _n)
  if(_n EQUAL 0)
    string(CONCAT _p "${_t} compiles no test file: a test executable builds one, named "
                     "after it (${_t}.cpp)")
    list(APPEND _problems "${_p}")
  endif()
  foreach(_f IN LISTS _own)
    get_filename_component(_base "${_f}" NAME_WE)
    if(_base STREQUAL _t)
      list(APPEND _test_files "${_f}")
    else()
      string(CONCAT _p "${_f} is compiled into ${_t}: each test file is its own executable, "
                       "named after it (plab_add_test(${_base}) beside it), and helpers "
                       "shared by several go in a support library, not in a test_*.cpp")
      list(APPEND _problems "${_p}")
    endif()
  endforeach()
endforeach()
string(REPLACE "," ";" _shared "${SHARED}")
if(DEFINED ROOT)
  get_filename_component(_root_name "${ROOT}" NAME)
  file(GLOB_RECURSE _on_disk RELATIVE "${ROOT}" "${ROOT}/test_*.cpp")
  foreach(_path IN LISTS _on_disk)
    if(_path MATCHES "(^|/)(fixtures|golden)/")
      continue()
    endif()
    set(_skip OFF)
    foreach(_dir IN LISTS NOT_CONFIGURED)
      if(_path MATCHES "^${_dir}/")
        set(_skip ON)
      endif()
    endforeach()
    list(FIND _test_files "${_path}" _k)
    list(FIND _shared "${_path}" _s)
    if(_skip OR NOT _k EQUAL -1 OR NOT _s EQUAL -1)
      continue()
    endif()
    get_filename_component(_base "${_path}" NAME_WE)
    list(FIND _names "${_base}" _same_name)
    if(NOT _same_name EQUAL -1)
      string(CONCAT _p "${_root_name}/${_path} is not the test file of ${_base}, which "
                       "builds another ${_base}.cpp: rename one (test file names are unique, "
                       "as target names are)")
      list(APPEND _problems "${_p}")
    else()
      string(CONCAT _p "${_root_name}/${_path} is the test file of no executable: add "
                       "plab_add_test(${_base}) to its folder's CMakeLists.txt")
      list(APPEND _problems "${_p}")
    endif()
  endforeach()
endif()
if(_problems)
  foreach(_p IN LISTS _problems)
    message(NOTICE "${_p}")
  endforeach()
  message(FATAL_ERROR "test files not where a reader looks for them (listed above)")
endif()
list(LENGTH _names _n)
message(STATUS "${_n} test executables, each building the one test file named after it")
