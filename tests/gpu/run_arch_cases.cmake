# The [arch] cases of several test binaries under one emulated architecture:
#
#   cmake -DARCH=sm_75 "-DBINARIES=<test_simt>;<test_gpu_flash>;..." -P run_arch_cases.cmake
#
# Each binary runs "[arch]" with PLAB_SIMT_ARCH=ARCH and the warnings every
# Catch2 entry carries (-w NoTests: a binary with no [arch] case fails, so the
# list in tests/gpu/CMakeLists.txt cannot name a binary that has none; -w
# NoAssertions). Every binary runs, then the script fails naming each that failed.
foreach(_v ARCH BINARIES)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "run_arch_cases.cmake: -D${_v}=... is required")
  endif()
endforeach()
set(ENV{PLAB_SIMT_ARCH} "${ARCH}")
set(_failed "")
foreach(_bin IN LISTS BINARIES)
  get_filename_component(_name "${_bin}" NAME)
  message("== ${_name} \"[arch]\" under PLAB_SIMT_ARCH=${ARCH}")
  execute_process(COMMAND "${_bin}" "[arch]" -w NoTests -w NoAssertions RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    list(APPEND _failed "${_name} (exit ${_rc})")
  endif()
endforeach()
if(_failed)
  string(REPLACE ";" ", " _failed "${_failed}")
  message(FATAL_ERROR "[arch] cases under ${ARCH} failed in: ${_failed}")
endif()
list(LENGTH BINARIES _n)
message("[arch] cases of ${_n} binaries under ${ARCH}: all passed")
