# Runs plab-viewer headless where its self-checks must fail (issue 45: a window too small
# for the toy panel at --scale 2): a non-zero exit (1 from the viewer; xvfb-run itself may
# answer 5 when its temporary folder will not go) and stdout matching EXPECT, the NO line.
# -DVIEWER -DXVFB -DARGS (list) -DEXPECT (regex)
execute_process(COMMAND ${XVFB} -a -s "-screen 0 1280x800x24" ${VIEWER} ${ARGS}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit ${rc}\nstdout: ${out}\nstderr: ${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "expected a non-zero exit (a self-check said NO), got 0")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "no failing check line matching /${EXPECT}/")
endif()
