# `make run` then `make test` reuses what `make run` built (issue 60): `make run`
# configures before `make test` installs the test packages (pybind11, numpy, ...),
# so no compile flag of a file both configures build may depend on what is installed.
#   cmake -DROOT=<source> -DSCRATCH=<dir> [-DEXTRA_B=<flags of the second>] -P check_configure_agrees.cmake
# Configures twice into SCRATCH/a and SCRATCH/b: a as on a machine without the
# Python module's packages (CMAKE_DISABLE_FIND_PACKAGE_*), b with what this machine
# has (and EXTRA_B, which the self-test uses to plant a difference). Every file in a's
# compile_commands.json must compile in b with the same command (build folder
# names aside); b may compile more (the module, the tests' extras).
set(_common -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLAB_CUDA=OFF)
file(REMOVE_RECURSE ${SCRATCH})
foreach(_which a b)
  if(_which STREQUAL "a")
    set(_extra -DCMAKE_DISABLE_FIND_PACKAGE_Python3=ON -DCMAKE_DISABLE_FIND_PACKAGE_pybind11=ON)
  else()
    set(_extra ${EXTRA_B})
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${ROOT} -B ${SCRATCH}/${_which} ${_common} ${_extra}
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "configure ${_which} failed:\n${_out}${_err}")
  endif()
  file(READ ${SCRATCH}/${_which}/compile_commands.json _json_${_which})
endforeach()

# b's commands by file (the folder name b -> a, so that only flags can differ).
string(JSON _nb LENGTH "${_json_b}")
math(EXPR _last "${_nb} - 1")
foreach(_i RANGE ${_last})
  string(JSON _file GET "${_json_b}" ${_i} file)
  string(JSON _cmd GET "${_json_b}" ${_i} command)
  string(REGEX MATCH " -o ([^ ]+)" _m "${_cmd}")  # one source may build several objects
  set(_object "${CMAKE_MATCH_1}")
  string(REPLACE "${SCRATCH}/b" "${SCRATCH}/a" _cmd "${_cmd}")
  string(REPLACE "${SCRATCH}/b" "${SCRATCH}/a" _file "${_file}")  # generated unity files
  string(MD5 _key "${_file} ${_object}")
  set(_b_${_key} "${_cmd}")
endforeach()

string(JSON _na LENGTH "${_json_a}")
math(EXPR _last "${_na} - 1")
set(_differ 0)
foreach(_i RANGE ${_last})
  string(JSON _file GET "${_json_a}" ${_i} file)
  string(JSON _cmd GET "${_json_a}" ${_i} command)
  string(REGEX MATCH " -o ([^ ]+)" _m "${_cmd}")
  set(_object "${CMAKE_MATCH_1}")
  string(MD5 _key "${_file} ${_object}")
  if(NOT DEFINED _b_${_key})
    math(EXPR _differ "${_differ} + 1")
    message("${_file} (${_object}): compiled without the test packages only")
  elseif(NOT _cmd STREQUAL _b_${_key})
    math(EXPR _differ "${_differ} + 1")
    if(_differ LESS_EQUAL 3)
      message("${_file} (${_object}) compiles differently once the test packages are installed:\n"
              "  without: ${_cmd}\n  with:    ${_b_${_key}}")
    endif()
  endif()
endforeach()
if(_differ GREATER 0)
  message(FATAL_ERROR "${_differ} of ${_na} files would compile again in `make test` after "
                      "`make run`: a compile flag depends on what is installed")
endif()
message("configure agrees: all ${_na} files compiled without the test packages compile the "
        "same with them (${_nb} in all)")
file(REMOVE_RECURSE ${SCRATCH})
