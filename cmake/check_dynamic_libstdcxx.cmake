# Post-build check: the extension must use the process's shared libstdc++ (torch does). A copy
# linked in statically keeps its own locale and exception state, and corrupts both at run time.
execute_process(COMMAND "${READELF}" -d "${LIBRARY}" OUTPUT_VARIABLE dynamic RESULT_VARIABLE status)
if(status EQUAL 0 AND NOT dynamic MATCHES "libstdc\\+\\+\\.so")
  file(REMOVE "${LIBRARY}")
  message(FATAL_ERROR
    "${LIBRARY} links the C++ runtime statically: the compiler (${COMPILER}) defaults to "
    "-static-libstdc++. torch and luminal must share one libstdc++; build with a compiler that links it "
    "dynamically, e.g. CXX=/usr/bin/g++.")
endif()
