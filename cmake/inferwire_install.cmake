include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(INFERWIRE_CMAKE_DIR "${CMAKE_INSTALL_DATADIR}/cmake/inferwire"
    CACHE STRING "Where the CMake package files of inferwire are installed")

install(DIRECTORY include/inferwire DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The license (Apache-2.0) goes with every installed copy.
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/inferwire)

set(_iw_targets inferwire_inferwire)
foreach(c IN LISTS INFERWIRE_AVAILABLE_COMPONENTS)
  list(APPEND _iw_targets inferwire_${c})
endforeach()
install(TARGETS ${_iw_targets} EXPORT inferwireTargets)
install(EXPORT inferwireTargets NAMESPACE inferwire:: DESTINATION ${INFERWIRE_CMAKE_DIR})
export(EXPORT inferwireTargets NAMESPACE inferwire::
       FILE "${PROJECT_BINARY_DIR}/inferwireTargets.cmake")

configure_package_config_file(cmake/inferwireConfig.cmake.in
  "${PROJECT_BINARY_DIR}/inferwireConfig.cmake"
  INSTALL_DESTINATION ${INFERWIRE_CMAKE_DIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/inferwireConfigVersion.cmake"
  COMPATIBILITY SameMajorVersion ARCH_INDEPENDENT)
install(FILES
  "${PROJECT_BINARY_DIR}/inferwireConfig.cmake"
  "${PROJECT_BINARY_DIR}/inferwireConfigVersion.cmake"
  cmake/inferwire_deps.cmake
  cmake/inferwire_grpc.cmake
  DESTINATION ${INFERWIRE_CMAKE_DIR})
# The protos, for consumers of the grpc component (generated and compiled in their build).
install(FILES proto/grpc_service.proto proto/model_config.proto proto/health.proto
  DESTINATION ${CMAKE_INSTALL_DATADIR}/inferwire/proto)
# The build tree is a usable package too (export()): give it the dependency table as well.
configure_file(cmake/inferwire_deps.cmake "${PROJECT_BINARY_DIR}/inferwire_deps.cmake" COPYONLY)
configure_file(cmake/inferwire_grpc.cmake "${PROJECT_BINARY_DIR}/inferwire_grpc.cmake" COPYONLY)
