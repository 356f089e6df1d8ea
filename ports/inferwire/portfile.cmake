# SPDX-License-Identifier: Apache-2.0
# Overlay port for inferwire, a header-only library:
#   vcpkg install "inferwire[grpc,gms]" --overlay-ports=<inferwire checkout>/ports
# or, for a checkout being edited (vcpkg's binary cache keys on this folder's files, not on the
# checkout's), the port cmake/vcpkg_port.cmake writes, whose hash follows the sources.
#
# Each feature is one component (http, grpc, shm, cuda, gms; core and v2 are always there):
# the feature decides what is configured, installed and exported, never whatever else
# happens to be installed. The version is this port's vcpkg.json, read by CMakeLists.txt.
set(VCPKG_BUILD_TYPE release)  # header-only: no debug variant

# The overlay builds the checkout it lives in (a registry port would use vcpkg_from_github),
# or, as written by cmake/vcpkg_port.cmake, the checkout it names, whose sources it hashed so
# that vcpkg's binary cache tells one edit of the checkout from another.
if(EXISTS "${CMAKE_CURRENT_LIST_DIR}/source-dir.txt")
  file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/source-dir.txt" SOURCE_PATH LIMIT_COUNT 1)
  file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/sources.sha256" expected LIMIT_COUNT 1)
  include("${SOURCE_PATH}/cmake/vcpkg_sources_hash.cmake")
  inferwire_sources_hash("${SOURCE_PATH}" actual)
  if(NOT actual STREQUAL expected)
    message(FATAL_ERROR "${SOURCE_PATH} changed since its overlay port was written: run "
                        "cmake -DOUT=<dir> -P ${SOURCE_PATH}/cmake/vcpkg_port.cmake again")
  endif()
else()
  get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
endif()

vcpkg_check_features(OUT_FEATURE_OPTIONS FEATURE_OPTIONS
  FEATURES
    http INFERWIRE_WITH_HTTP
    grpc INFERWIRE_WITH_GRPC
    shm  INFERWIRE_WITH_SHM
    cuda INFERWIRE_WITH_CUDA
    gms  INFERWIRE_WITH_GMS)

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    ${FEATURE_OPTIONS}
    -DINFERWIRE_WITH_V2=ON
    -DINFERWIRE_BUILD_TESTS=OFF
    -DINFERWIRE_BUILD_EXAMPLES=OFF
    -DINFERWIRE_BUILD_BENCHMARKS=OFF
    -DINFERWIRE_BUILD_SERVERS=OFF
    -DINFERWIRE_CMAKE_DIR=share/inferwire)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(PACKAGE_NAME inferwire CONFIG_PATH share/inferwire)

file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/lib" "${CURRENT_PACKAGES_DIR}/debug")
file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
