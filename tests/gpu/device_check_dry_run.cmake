# kernels/device-check.sh --dry-run (issue 14): on any machine, GPU or not, it
# prints the prerequisites it found and the steps a real run takes, exits 0,
# and builds nothing (the build folder it names must not appear).
set(build "${WORK_DIR}/device-check-dry-run-build")
file(REMOVE_RECURSE "${build}")
execute_process(COMMAND ${CMAKE_COMMAND} -E env PLAB_DEVICE_BUILD=${build}
                        bash ${SCRIPT} --dry-run
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "device-check.sh --dry-run exited ${rc}")
endif()
foreach(expect
    "=== 0. prerequisites"
    "ok +cmake +[0-9]"
    "(ok|MISSING) +C\\+\\+ compiler"
    "(ok|MISSING) +nvcc"
    "(ok|MISSING) +Eigen 3"
    "(ok|MISSING) +Catch2 v2"
    "(ok|none) +CUDA device"
    "steps a real run takes:"
    "1. native build"
    "2. GPU tests with PLAB_REQUIRE_NATIVE=1"
    "6. plab bench of gpu-ref and gpu"
    "7. table: cpu-ref, cpu, gpu-ref, gpu"
    "device-check --dry-run: (every prerequisite found|[0-9]+ prerequisite)")
  if(NOT "${out}" MATCHES "${expect}")
    message(FATAL_ERROR "device-check.sh --dry-run printed no line matching '${expect}'")
  endif()
endforeach()
if(EXISTS "${build}")
  message(FATAL_ERROR "device-check.sh --dry-run created ${build}: a dry run builds nothing")
endif()
# An unknown option is one clear line and exit 2, not a run.
execute_process(COMMAND bash ${SCRIPT} --dryrun OUTPUT_VARIABLE out2 ERROR_VARIABLE err2
                RESULT_VARIABLE rc2)
if(NOT rc2 EQUAL 2 OR NOT "${err2}" MATCHES "unknown option '--dryrun'")
  message(FATAL_ERROR "device-check.sh --dryrun: expected exit 2 and 'unknown option', got ${rc2}: ${err2}")
endif()
