# Installs inferwire from BUILD_DIR into a fresh prefix, then configures, builds and runs the
# consumer project against it, twice:
#   1. COMPONENTS core, with Boost and OpenSSL made unfindable: proves that the package looks
#      up only the dependencies of the requested components;
#   2. COMPONENTS v2: the JSON and binary codecs from the installed tree;
#   3. COMPONENTS grpc (when installed): the protos generated and compiled in the consumer's
#      build, and the gRPC client.
foreach(v SOURCE_DIR BUILD_DIR WORK_DIR GENERATOR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run.cmake: ${v} is not set")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()

run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
# The license travels with the installed package.
if(NOT EXISTS "${prefix}/share/doc/inferwire/LICENSE")
  message(FATAL_ERROR "the installed tree lacks share/doc/inferwire/LICENSE")
endif()
file(READ "${prefix}/share/doc/inferwire/LICENSE" license)
if(NOT license MATCHES "Apache License")
  message(FATAL_ERROR "share/doc/inferwire/LICENSE is not the Apache License")
endif()

set(search "${prefix}")
if(PREFIX_PATH)
  list(APPEND search ${PREFIX_PATH})
endif()
string(REPLACE ";" "\\;" search_arg "${search}")

set(components core v2)
if(EXISTS "${prefix}/share/inferwire/proto/grpc_service.proto")
  list(APPEND components grpc)
endif()
foreach(component IN LISTS components)
  set(build "${WORK_DIR}/build-${component}")
  set(extra "")
  if(component STREQUAL "core")
    list(APPEND extra -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON)
  endif()
  set(compiler "")
  if(CXX_COMPILER)
    set(compiler -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
  endif()
  run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/cmake_consumer" -B "${build}" -G "${GENERATOR}"
      ${compiler} "-DCMAKE_PREFIX_PATH=${search_arg}" -DCONSUMER_COMPONENT=${component} ${extra})
  run(${CMAKE_COMMAND} --build "${build}")
  run("${build}/consumer")
  message(STATUS "consumer with COMPONENTS ${component}: ok")
endforeach()
