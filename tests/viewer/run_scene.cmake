# Renders one viewer scene headless under Xvfb and checks the result.
# -DVIEWER -DCHECK -DXVFB -DSCENE -DEXPECT (regex for the self-check line)
# -DWIDTH -DHEIGHT -DOUT [-DEXTRA=list of more viewer arguments]
# [-DCOLOURS=list of NAME=RRGGBB:MIN_PIXELS the picture must contain, see png_check.cpp]
file(REMOVE ${OUT})
execute_process(
  COMMAND ${XVFB} -a -s "-screen 0 1280x800x24" ${VIEWER} --screenshot ${OUT} --scene ${SCENE}
          --width ${WIDTH} --height ${HEIGHT} ${EXTRA}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "plab-viewer --scene ${SCENE} exited with ${rc}")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "self-check line not found: expected /${EXPECT}/")
endif()
execute_process(COMMAND ${CHECK} ${OUT} ${WIDTH} ${HEIGHT} ${COLOURS} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "screenshot check failed for ${OUT}")
endif()
