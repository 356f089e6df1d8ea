# install(): the headers and CMake package of the components this build has, and the programs.
#
# Two install components, so a package can take one without the other:
#   inferwire_development  headers, CMake package files, protos, license (needs no build)
#   inferwire_programs     inferwire-server, inferwire-gms-server, the PyTorch allocator
#                          (reference_server/CMakeLists.txt; needs `cmake --build` first)
# `cmake --install <build>` installs both. Every installed file names paths relative to the
# prefix only, so the prefix may be moved and the source and build trees removed.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(INFERWIRE_CMAKE_DIR "${CMAKE_INSTALL_DATADIR}/cmake/inferwire"
    CACHE STRING "Where the CMake package files of inferwire are installed")
set(INFERWIRE_PROTO_DIR "${CMAKE_INSTALL_DATADIR}/inferwire/proto")
set(_iw_dev COMPONENT inferwire_development)

# Headers: the common ones, then one folder per built component.
install(FILES include/inferwire/core.hpp "${PROJECT_BINARY_DIR}/include/inferwire/version.hpp"
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/inferwire ${_iw_dev})
if("v2" IN_LIST INFERWIRE_AVAILABLE_COMPONENTS)
  install(FILES include/inferwire/v2.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/inferwire ${_iw_dev})
endif()
if("http" IN_LIST INFERWIRE_AVAILABLE_COMPONENTS)
  # The separately compiled bodies (INFERWIRE_SEPARATE_COMPILATION): the v2 codec and the client.
  install(FILES include/inferwire/src.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/inferwire ${_iw_dev})
endif()
foreach(c IN LISTS INFERWIRE_AVAILABLE_COMPONENTS)
  install(DIRECTORY include/inferwire/${c} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/inferwire ${_iw_dev})
endforeach()
# The license (Apache-2.0) goes with every installed copy.
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/inferwire ${_iw_dev})

set(_iw_targets inferwire_inferwire)
foreach(c IN LISTS INFERWIRE_AVAILABLE_COMPONENTS)
  list(APPEND _iw_targets inferwire_${c})
endforeach()
install(TARGETS ${_iw_targets} EXPORT inferwireTargets ${_iw_dev})
install(EXPORT inferwireTargets NAMESPACE inferwire:: DESTINATION ${INFERWIRE_CMAKE_DIR} ${_iw_dev})

configure_package_config_file(cmake/inferwireConfig.cmake.in
  "${PROJECT_BINARY_DIR}/package/inferwireConfig.cmake"
  INSTALL_DESTINATION ${INFERWIRE_CMAKE_DIR}
  PATH_VARS INFERWIRE_PROTO_DIR)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/inferwireConfigVersion.cmake"
  COMPATIBILITY SameMajorVersion ARCH_INDEPENDENT)
install(FILES
  "${PROJECT_BINARY_DIR}/package/inferwireConfig.cmake"
  "${PROJECT_BINARY_DIR}/inferwireConfigVersion.cmake"
  cmake/inferwire_deps.cmake
  cmake/inferwire_grpc.cmake
  DESTINATION ${INFERWIRE_CMAKE_DIR} ${_iw_dev})
# The protos, for consumers of the grpc component (generated and compiled in their build).
if("grpc" IN_LIST INFERWIRE_AVAILABLE_COMPONENTS)
  install(FILES proto/grpc_service.proto proto/model_config.proto proto/health.proto
    DESTINATION ${INFERWIRE_PROTO_DIR} ${_iw_dev})
endif()
