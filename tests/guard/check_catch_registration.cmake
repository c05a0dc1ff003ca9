# The registration guard: every Catch2 case runs under ctest exactly once.
#
# Why it exists (issue 8): catch_discover_tests turns `--list-test-names-only`
# output into a CMake list, so a case name with ';' became two ctest entries;
# neither half matched a case, Catch2 2.13 printed "No tests ran", exited 0, and
# ctest reported Passed for three cases that never ran. This script makes that
# class of mistake fail loudly, without running a single test case:
#   1. every case each Catch2 binary lists (--list-test-names-only) must be
#      selected by exactly one ctest entry;
#   2. every ctest entry that runs one of these binaries must select exactly one
#      case — asked of the binary itself (`<binary> <entry's spec>
#      --list-test-names-only`), so Catch2's own matching and escaping decide;
#   3. every such entry must pass `-w NoTests` (a spec that matches nothing
#      fails) and `-w NoAssertions` (a case that asserts nothing fails).
# Entries that run other programs (lessons, viewer scenes, this guard) are not
# Catch2 entries and are ignored.
#
# Usage (a ctest of its own, see tests/guard/CMakeLists.txt):
#   cmake -DBUILD_DIR=<ctest build tree> -DCTEST=<ctest> "-DBINARIES=<exe>;<exe>"
#         -P check_catch_registration.cmake
# Exit 0 with a one-line summary, or non-zero with one line per problem.
cmake_minimum_required(VERSION 3.25)  # string(JSON), ctest --show-only=json-v1

foreach(var BUILD_DIR CTEST BINARIES)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "registration guard: -D${var}=... is required "
                        "(BUILD_DIR: the ctest build tree, CTEST: the ctest program, "
                        "BINARIES: the Catch2 test executables)")
  endif()
endforeach()

# Case names are free text: ';' separates CMake list elements and '[' ']'
# group them, so names are carried through list operations encoded.
function(plab_encode out text)
  string(REPLACE "\\" "<backslash>" text "${text}")
  string(REPLACE ";" "<semicolon>" text "${text}")
  string(REPLACE "[" "<lbracket>" text "${text}")
  string(REPLACE "]" "<rbracket>" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
function(plab_decode out text)
  string(REPLACE "<rbracket>" "]" text "${text}")
  string(REPLACE "<lbracket>" "[" text "${text}")
  string(REPLACE "<semicolon>" ";" text "${text}")
  string(REPLACE "<backslash>" "\\" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# The case names a binary selects with `args` (encoded, one list element each).
# --list-test-names-only runs nothing; its exit code is the count clamped to
# 255, so the names are counted from the output instead.
function(plab_list_cases out binary)
  execute_process(COMMAND "${binary}" ${ARGN} --list-test-names-only
                  OUTPUT_VARIABLE text ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc MATCHES "^[0-9]+$")
    message(FATAL_ERROR "registration guard: '${binary} --list-test-names-only' failed "
                        "(${rc}): ${err}")
  endif()
  plab_encode(text "${text}")
  string(REPLACE "\r" "" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(names "")
  foreach(line IN LISTS lines)
    if(NOT line STREQUAL "")
      list(APPEND names "${line}")
    endif()
  endforeach()
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

set(problems "")
function(plab_problem text)
  plab_encode(text "${text}")
  list(APPEND problems "${text}")
  set(problems "${problems}" PARENT_SCOPE)
endfunction()

# 1. The cases of every binary, each with a registration counter.
set(n_cases 0)
set(bin_paths "")
list(LENGTH BINARIES n_bins)
math(EXPR last_bin "${n_bins} - 1")
foreach(bi RANGE ${last_bin})
  list(GET BINARIES ${bi} bin)
  if(NOT EXISTS "${bin}")
    message(FATAL_ERROR "registration guard: test binary ${bin} does not exist (build the "
                        "tests before running ctest)")
  endif()
  file(REAL_PATH "${bin}" real)
  list(APPEND bin_paths "${real}")
  plab_list_cases(cases_${bi} "${bin}")
  foreach(name IN LISTS cases_${bi})
    string(MD5 key "${name}")
    set(count_${bi}_${key} 0)
    math(EXPR n_cases "${n_cases} + 1")
  endforeach()
endforeach()

# 2. The ctest entries of the build tree, read without running them.
execute_process(COMMAND "${CTEST}" --test-dir "${BUILD_DIR}" --show-only=json-v1
                OUTPUT_VARIABLE json ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "registration guard: ctest --show-only=json-v1 in ${BUILD_DIR} "
                      "failed (${rc}): ${err}")
endif()
string(JSON tests GET "${json}" tests)
string(JSON n_tests LENGTH "${tests}")
set(n_entries 0)
if(n_tests GREATER 0)
  math(EXPR last_test "${n_tests} - 1")
  foreach(ti RANGE ${last_test})
    string(JSON test GET "${tests}" ${ti})
    string(JSON entry GET "${test}" name)
    string(JSON n_args ERROR_VARIABLE no_command LENGTH "${test}" command)
    if(no_command OR n_args LESS 1)
      continue()
    endif()
    string(JSON exe GET "${test}" command 0)
    if(NOT EXISTS "${exe}")
      continue()
    endif()
    file(REAL_PATH "${exe}" exe)
    list(FIND bin_paths "${exe}" bi)
    if(bi LESS 0)
      continue()  # not a Catch2 binary of this suite
    endif()
    math(EXPR n_entries "${n_entries} + 1")
    list(GET BINARIES ${bi} bin)
    get_filename_component(bin_name "${bin}" NAME)

    # The entry's options after the spec, joined as |opt|opt| for searching.
    set(flags "|")
    if(n_args GREATER 2)
      math(EXPR last_arg "${n_args} - 1")
      foreach(ai RANGE 2 ${last_arg})
        string(JSON arg GET "${test}" command ${ai})
        string(APPEND flags "${arg}|")
      endforeach()
    endif()

    # 3. The two warnings that turn silent passes into failures.
    foreach(warning NoTests NoAssertions)
      string(FIND "${flags}" "|-w|${warning}|" at)
      if(at LESS 0)
        plab_problem("ctest entry '${entry}' (${bin_name}) lacks `-w ${warning}`: register Catch2 binaries with plab_add_test (tests/CMakeLists.txt), which passes it")
      endif()
    endforeach()

    # 2. Exactly one case selected, asked of the binary with the entry's own spec.
    set(spec "")
    if(n_args GREATER 1)
      string(JSON spec GET "${test}" command 1)
    endif()
    plab_list_cases(selected "${bin}" "${spec}")
    list(LENGTH selected n_selected)
    if(n_selected EQUAL 1)
      string(MD5 key "${selected}")
      if(DEFINED count_${bi}_${key})
        math(EXPR count_${bi}_${key} "${count_${bi}_${key}} + 1")
      endif()
    else()
      plab_problem("ctest entry '${entry}' (${bin_name}) selects ${n_selected} Catch2 cases, not exactly one: was a case name split (';' in a name) or written with wildcards?")
    endif()
  endforeach()
endif()

# 1. Every case registered exactly once.
foreach(bi RANGE ${last_bin})
  list(GET BINARIES ${bi} bin)
  get_filename_component(bin_name "${bin}" NAME)
  foreach(name IN LISTS cases_${bi})
    string(MD5 key "${name}")
    plab_decode(shown "${name}")
    if(count_${bi}_${key} EQUAL 0)
      if(shown MATCHES ";")
        plab_problem("Catch2 case '${shown}' of ${bin_name} is not registered as a ctest entry, so ctest never runs it: catch_discover_tests splits names at ';' (rename it without ';')")
      else()
        plab_problem("Catch2 case '${shown}' of ${bin_name} is not registered as a ctest entry, so ctest never runs it (register the binary with plab_add_test and rebuild)")
      endif()
    elseif(count_${bi}_${key} GREATER 1)
      plab_problem("Catch2 case '${shown}' of ${bin_name} is registered as ${count_${bi}_${key}} ctest entries, so it runs ${count_${bi}_${key}} times (register each binary once)")
    endif()
  endforeach()
endforeach()

list(LENGTH problems n_problems)
if(n_problems GREATER 0)
  foreach(p IN LISTS problems)
    plab_decode(p "${p}")
    message("registration guard: ${p}")
  endforeach()
  message(FATAL_ERROR "registration guard: ${n_problems} problem(s) in ${BUILD_DIR} "
                      "(${n_cases} Catch2 cases in ${n_bins} binaries, ${n_entries} Catch2 ctest entries)")
endif()
message("registration guard: ${n_cases} Catch2 cases in ${n_bins} binaries, ${n_entries} ctest "
        "entries: every case exactly one entry, every entry exactly one case, each with "
        "-w NoTests -w NoAssertions")
