# The house's layering, read from the includes: cmake -DROOT=<repo> -P check_includes.cmake
#
# What it keeps true (ARCHITECTURE.md, "Dependencies point one way"):
#   1. No include loop inside src/. A "room" is a file without its extension,
#      so model/model_io.h and model/model_io.cpp are one room: a .cpp never
#      gets included, but model_io.cpp including llama2c.h while llama2c.h
#      includes model_io.h is still two rooms that need each other (the loop
#      issue 18 removed). Only `#include "..."` counts; <...> are other projects.
#   2. src/backends/ and kernels/ do not include each other: the registry sits
#      above both, the Backend interface below both.
#   3. Folder rules (issue 44). The engine and what it stands on (src/core,
#      model, backends, runtime, trace; kernels/) include no client (src/perf, grade,
#      cli, python, serving; viewer/): a client wraps or measures the engine
#      from outside. In viewer/, window -> panels -> app, one way. And no client
#      reaches past the registry into src/backends/ or kernels/.
#   4. Names say what a file holds: no source file ends in _spec or _test
#      (issue 44 renamed attention_spec.h and mask_spec.*; tests live in tests/).
# Every quoted include must resolve (beside the file, then src/, the repo root,
# kernels/: the include paths the CMake targets use), or the check fails: an
# include it cannot see is an arrow it cannot check.
# Fails with one line per problem; tests/layering/selftest.cmake shows it does.

cmake_minimum_required(VERSION 3.20)  # cmake_path, and while(TRUE) as a condition

if(NOT DEFINED ROOT)
  message(FATAL_ERROR "check_includes.cmake: pass -DROOT=<the repository root>")
endif()

# Cross includes between src/backends/ and kernels/ that exist today, each with
# the issue that removes it. An entry that no longer occurs fails the check too,
# so the list can only shrink.
# None left: the Engine issue (#10) moved the registry above both
# (src/runtime/registry.cpp) and the Backend interface below both
# (src/core/backend.h). A new one would need its own entry and the issue
# that removes it.
set(KNOWN_EXCEPTIONS "")

file(GLOB_RECURSE _files RELATIVE "${ROOT}"
     "${ROOT}/src/*.h" "${ROOT}/src/*.hpp" "${ROOT}/src/*.cpp" "${ROOT}/src/*.cu"
     "${ROOT}/src/*.cuh" "${ROOT}/kernels/*.h" "${ROOT}/kernels/*.hpp" "${ROOT}/kernels/*.cpp"
     "${ROOT}/kernels/*.cu" "${ROOT}/kernels/*.cuh" "${ROOT}/viewer/*.h" "${ROOT}/viewer/*.cpp")
list(SORT _files)
list(LENGTH _files _n_files)
if(_n_files EQUAL 0)
  message(FATAL_ERROR "check_includes.cmake: no source files under ${ROOT}/src or ${ROOT}/kernels")
endif()

function(room_of path out)  # "src/model/llama2c.cpp" -> "src/model/llama2c"
  string(REGEX REPLACE "\\.[^./]*$" "" _r "${path}")
  set(${out} "${_r}" PARENT_SCOPE)
endfunction()
function(id_of name out)
  string(MAKE_C_IDENTIFIER "${name}" _id)
  set(${out} "${_id}" PARENT_SCOPE)
endfunction()

set(_problems "")
macro(problem)  # one problem, its pieces joined into one line
  string(CONCAT _p ${ARGN})
  list(APPEND _problems "${_p}")
endmacro()
set(_src_rooms "")
set(_edges "")  # "from -> to", file level
set(_n_includes 0)
foreach(_f IN LISTS _files)
  room_of("${_f}" _room)
  if(_f MATCHES "^src/")
    list(APPEND _src_rooms "${_room}")
  endif()
  get_filename_component(_dir "${_f}" DIRECTORY)
  file(STRINGS "${ROOT}/${_f}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
  foreach(_line IN LISTS _lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*$" "\\1" _name "${_line}")
    math(EXPR _n_includes "${_n_includes} + 1")
    set(_to "")
    foreach(_base IN ITEMS "${_dir}" "src" "." "kernels" "viewer")
      cmake_path(SET _cand NORMALIZE "${_base}/${_name}")
      if(EXISTS "${ROOT}/${_cand}" AND NOT IS_DIRECTORY "${ROOT}/${_cand}")
        set(_to "${_cand}")
        break()
      endif()
    endforeach()
    if(_to STREQUAL "")
      problem("${_f}: #include \"${_name}\" resolves nowhere (looked beside it, in "
                            "src/, the repository root, kernels/ and viewer/)")
      continue()
    endif()
    list(APPEND _edges "${_f} -> ${_to}")
    room_of("${_to}" _to_room)
    if(NOT _to_room STREQUAL _room)
      id_of("${_room}" _id)
      list(APPEND _out_${_id} "${_to_room}")
      id_of("${_room}__${_to_room}" _eid)
      if(NOT DEFINED _why_${_eid})
        set(_why_${_eid} "${_f} includes ${_to}")
      endif()
    endif()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES _src_rooms)
list(LENGTH _src_rooms _n_rooms)

# 1. Loops inside src/: peel off rooms that include no remaining room; what
# cannot be peeled lies on a loop or above one. Then walk one loop to name it.
set(_left ${_src_rooms})
set(_changed TRUE)
while(_changed)
  set(_changed FALSE)
  foreach(_r IN LISTS _left)
    id_of("${_r}" _id)
    set(_needs FALSE)
    foreach(_t IN LISTS _out_${_id})
      list(FIND _left "${_t}" _k)
      if(NOT _k EQUAL -1)
        set(_needs TRUE)
        break()
      endif()
    endforeach()
    if(NOT _needs)
      list(REMOVE_ITEM _left "${_r}")
      set(_changed TRUE)
    endif()
  endforeach()
endwhile()
if(_left)
  list(GET _left 0 _at)
  set(_path "")
  while(TRUE)
    list(FIND _path "${_at}" _seen)
    if(NOT _seen EQUAL -1)
      break()
    endif()
    list(APPEND _path "${_at}")
    id_of("${_at}" _id)
    foreach(_t IN LISTS _out_${_id})
      list(FIND _left "${_t}" _k)
      if(NOT _k EQUAL -1)
        set(_at "${_t}")
        break()
      endif()
    endforeach()
  endwhile()
  list(SUBLIST _path ${_seen} -1 _loop)
  list(APPEND _loop "${_at}")
  string(REPLACE ";" " -> " _loop_text "${_loop}")
  set(_because "")
  list(LENGTH _loop _len)
  math(EXPR _last "${_len} - 2")
  foreach(_i RANGE 0 ${_last})
    math(EXPR _j "${_i} + 1")
    list(GET _loop ${_i} _a)
    list(GET _loop ${_j} _b)
    id_of("${_a}__${_b}" _eid)
    list(APPEND _because "${_why_${_eid}}")
  endforeach()
  string(REPLACE ";" ", " _because_text "${_because}")
  problem("include loop inside src/: ${_loop_text} (${_because_text}). A room "
                        "must sit above what it includes, so one of these includes has to go")
endif()

# 2. src/backends/ <-> kernels/, file by file, against the known exceptions.
set(_unused ${KNOWN_EXCEPTIONS})
set(_n_known 0)
foreach(_e IN LISTS _edges)
  if(_e MATCHES "^src/backends/.* -> kernels/" OR _e MATCHES "^kernels/.* -> src/backends/")
    list(FIND KNOWN_EXCEPTIONS "${_e}" _k)
    if(_k EQUAL -1)
      problem("${_e}: src/backends/ and kernels/ must not include each other "
                            "(ARCHITECTURE.md: the registry sits above both, the Backend "
                            "interface below both)")
    else()
      list(REMOVE_ITEM _unused "${_e}")
      math(EXPR _n_known "${_n_known} + 1")
    endif()
  endif()
endforeach()
foreach(_e IN LISTS _unused)
  problem("known exception '${_e}' no longer occurs: remove it from "
                        "KNOWN_EXCEPTIONS in tests/layering/check_includes.cmake")
endforeach()

# 4. Names.
foreach(_f IN LISTS _files)
  if(_f MATCHES "_(spec|test)\\.[^./]+$")
    problem("${_f}: a source file named *_spec or *_test; name it for what it holds "
            "(attention_math.h, mask_grammar.h), and keep tests in tests/")
  endif()
endforeach()

# 3. Folder rules, edge by edge.
set(_ground "^(src/(core|model|backends|runtime|trace)|kernels)/")
set(_client "^(src/(perf|cli|python|serving|grade)|viewer)/")
set(_front "^(src/(cli|python|perf|serving|grade)|viewer)/")
set(_backend "^(src/backends|kernels)/")
set(_n_folder_edges 0)
foreach(_e IN LISTS _edges)
  string(REGEX MATCH "^([^ ]+) -> (.+)$" _m "${_e}")
  set(_from "${CMAKE_MATCH_1}")
  set(_to "${CMAKE_MATCH_2}")
  if(_from MATCHES "${_ground}" AND _to MATCHES "${_client}")
    problem("${_e}: the engine must not include a client (src/perf, cli, grade, python, serving, "
            "viewer/): the client calls or wraps the engine from outside")
  elseif(_from MATCHES "${_front}" AND _to MATCHES "${_backend}")
    problem("${_e}: a client (src/cli, grade, python, perf, serving, viewer/) must not include a "
            "backend or kernel: it asks the registry (runtime/registry.h) or a loaded model")
  elseif(_from MATCHES "^viewer/(app|checks)/" AND _to MATCHES "^viewer/(panels|window)/")
    problem("${_e}: viewer/app and viewer/checks must not include viewer/panels or "
            "viewer/window: the rooms include one way, window -> panels -> app "
            "(viewer/README.md)")
  elseif(_from MATCHES "^viewer/panels/" AND _to MATCHES "^viewer/window/")
    problem("${_e}: viewer/panels must not include viewer/window: the window draws "
            "the panels, not the other way (viewer/README.md)")
  else()
    math(EXPR _n_folder_edges "${_n_folder_edges} + 1")
  endif()
endforeach()

if(_problems)
  foreach(_p IN LISTS _problems)
    message(NOTICE "${_p}")  # unwrapped: one line each
  endforeach()
  list(LENGTH _problems _n_problems)
  message(FATAL_ERROR "${_n_problems} layering problem(s), listed above")
endif()
message(STATUS "layering ok: ${_n_files} files, ${_n_includes} quoted includes, ${_n_rooms} rooms "
               "in src/ with no include loop; src/backends/ <-> kernels/ only the ${_n_known} "
               "known exception(s); ${_n_folder_edges} includes keep the folder rules")
