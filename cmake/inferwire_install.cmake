# SPDX-License-Identifier: Apache-2.0
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

# Headers: the generated version, the top-level headers of the built components, then one
# folder per built component.
install(FILES "${PROJECT_BINARY_DIR}/include/inferwire/version.hpp"
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/inferwire ${_iw_dev})
# The umbrella headers (and src.hpp, the separately compiled bodies of the v2 codec and the
# HTTP client), each with its component.
foreach(entry IN LISTS INFERWIRE_HEADER_COMPONENTS)
  if(NOT entry MATCHES "^([a-z0-9_]+\\.hpp)=(.*)$")
    continue()
  endif()
  set(_iw_file "include/inferwire/${CMAKE_MATCH_1}")
  if(CMAKE_MATCH_2 IN_LIST INFERWIRE_AVAILABLE_COMPONENTS AND EXISTS "${PROJECT_SOURCE_DIR}/${_iw_file}")
    install(FILES ${_iw_file} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/inferwire ${_iw_dev})
  endif()
endforeach()
# Headers outside their component's folder are left out when that component is not built.
set(_iw_excluded "")
foreach(entry IN LISTS INFERWIRE_HEADER_COMPONENTS)
  if(entry MATCHES "^([a-z0-9_]+/.*)=(.*)$" AND NOT CMAKE_MATCH_2 IN_LIST INFERWIRE_AVAILABLE_COMPONENTS)
    get_filename_component(_iw_name "${CMAKE_MATCH_1}" NAME)
    list(APPEND _iw_excluded PATTERN "${_iw_name}" EXCLUDE)
  endif()
endforeach()
foreach(c IN LISTS INFERWIRE_AVAILABLE_COMPONENTS)
  install(DIRECTORY include/inferwire/${c} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/inferwire ${_iw_dev}
          ${_iw_excluded})
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
