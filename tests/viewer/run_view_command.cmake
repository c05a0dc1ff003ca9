# Issue 17: the printed "command for this view", run. Renders a panel headless with
# --print-command, takes its "command: plab ..." line, runs it in /bin/sh (so the
# prompt's shell quoting is tested too) with the built plab first on PATH, and compares
# the command's --json with the numbers the viewer printed (plab_view_command_check).
# -DVIEWER -DXVFB -DPLAB -DCOMMAND_CHECK -DOUT_DIR -DARGS (list of viewer arguments)
# [-DJSON_ONLY=ON: a panel without such numbers; the command must run and print JSON]
file(MAKE_DIRECTORY ${OUT_DIR})
execute_process(
  COMMAND ${XVFB} -a -s "-screen 0 1280x800x24" ${VIEWER} --screenshot ${OUT_DIR}/view.png
          --print-command ${ARGS}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "plab-viewer exited with ${rc}")
endif()
file(WRITE ${OUT_DIR}/viewer_out.txt "${out}")
string(REGEX MATCH "\ncommand: (plab [^\n]*)" _m "\n${out}")
if(NOT _m)
  message(FATAL_ERROR "no 'command: plab ...' line in the viewer's output")
endif()
set(_command "${CMAKE_MATCH_1}")
get_filename_component(_plab_dir ${PLAB} DIRECTORY)
message("running: ${_command}")
execute_process(COMMAND ${CMAKE_COMMAND} -E env "PATH=${_plab_dir}:$ENV{PATH}" /bin/sh -c
                        "${_command}"
                RESULT_VARIABLE rc OUTPUT_FILE ${OUT_DIR}/plab.json ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the printed command exited with ${rc}: ${err}")
endif()
if(JSON_ONLY)
  file(READ ${OUT_DIR}/plab.json _json)
  string(JSON _type ERROR_VARIABLE _json_error TYPE "${_json}")
  if(NOT _type STREQUAL "OBJECT")
    message(FATAL_ERROR "the command did not print a JSON object: ${_json_error}")
  endif()
  message("the command ran and printed a JSON object")
  return()
endif()
execute_process(COMMAND ${COMMAND_CHECK} ${OUT_DIR}/viewer_out.txt ${OUT_DIR}/plab.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the command does not reproduce the panel's numbers")
endif()
