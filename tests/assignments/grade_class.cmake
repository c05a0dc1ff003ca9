# Runs lessons/assignments/grade_class.sh (plab grade-class), what the assignments' README and
# lessons/INSTRUCTORS.md show for grading a class, on a class of six
# submissions, and checks the CSV it writes row by row; and that the README shows
# the script as it is (tests/assignments/CMakeLists.txt).
#   -DPLAB=... -DSOURCE=repo root -DSCRATCH=dir -DPYTHON=... -DMUTATE=mutate.py
set(_a "${SOURCE}/lessons/assignments")
set(_class "${SCRATCH}/class")
file(REMOVE_RECURSE "${_class}")
file(MAKE_DIRECTORY "${_class}")
# alice: the solution; bob: the starter; carol: the C++ solution; dave: a planted
# mistake (no 1/sqrt(Dh)); erin: a syntax error; frank: a compile error.
configure_file("${_a}/attention/solution.py" "${_class}/alice.py" COPYONLY)
configure_file("${_a}/attention/starter.py" "${_class}/bob.py" COPYONLY)
configure_file("${_a}/attention/solution.cpp" "${_class}/carol.cpp" COPYONLY)
execute_process(COMMAND ${PYTHON} ${MUTATE} "${_a}/attention/solution.py"
                        "${SOURCE}/tests/assignments/mistakes/attention_no_scale.mutation"
                        "${_class}/dave.py" RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "the planted mistake does not apply")
endif()
configure_file("${SOURCE}/tests/assignments/mistakes/syntax_error.py" "${_class}/erin.py" COPYONLY)
configure_file("${SOURCE}/tests/assignments/mistakes/compile_error.cpp" "${_class}/frank.cpp"
               COPYONLY)
execute_process(COMMAND ${CMAKE_COMMAND} -E env PLAB=${PLAB}
                        sh "${_a}/grade_class.sh" attention "${_class}"
                OUTPUT_VARIABLE _csv ERROR_VARIABLE _err RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "grade_class.sh: exit ${_rc}\n${_err}")
endif()
# One row a file, in the order the files finished (two graded at a time). dave's
# one mistake fails four of the five checks: with scores in the hundreds the
# softmax is one-hot with or without 1/sqrt(Dh), so the large-score check passes.
# (The compiler's quotes depend on the locale; a ';' would split the list of regexes.)
set(_rows
    "^file,score,checks_passed,checks,error,seconds\n"
    "\nalice.py,1.0,5,5,,[0-9]+\\.[0-9]\n"
    "\nbob.py,0.0,0,5,,[0-9]+\\.[0-9]\n"
    "\ndave.py,0.2,1,5,,[0-9]+\\.[0-9]\n"
    "\nerin.py,0,0,,plab: error: [^\n,]*erin.py: SyntaxError: [^\n,]*\\(line 4\\),[0-9]+\\.[0-9]\n"
    "\ncarol.cpp,1.0,5,5,,[0-9]+\\.[0-9]\n"
    "\nfrank.cpp,0,0,,\"plab: error: [^\n]*frank.cpp does not compile [^\n]*error: expected [^\n]* before [^\n]*\",[0-9]+\\.[0-9]\n")
string(REGEX MATCHALL "\n" _lines "${_csv}")
list(LENGTH _lines _n_lines)
if(NOT _n_lines EQUAL 7)
  message(FATAL_ERROR "grade_class.sh: ${_n_lines} lines, expected the header and 6 rows\n${_csv}")
endif()
foreach(_re IN LISTS _rows)
  if(NOT _csv MATCHES "${_re}")
    message(FATAL_ERROR "grade_class.sh: no match for '${_re}' in\n${_csv}")
  endif()
endforeach()
foreach(_json alice bob carol dave)
  if(NOT EXISTS "${_class}/${_json}.json")
    message(FATAL_ERROR "grade_class.sh wrote no ${_json}.json")
  endif()
endforeach()
# The README shows the script as it is.
file(READ "${_a}/grade_class.sh" _script)
file(READ "${_a}/README.md" _readme)
string(FIND "${_readme}" "${_script}" _at)
if(_at EQUAL -1)
  message(FATAL_ERROR "lessons/assignments/README.md does not show grade_class.sh as it is")
endif()
message(STATUS "grade_class.sh: the CSV as expected\n${_csv}")
