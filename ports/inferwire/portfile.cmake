# Overlay port for inferwire, a header-only library:
#   vcpkg install inferwire[grpc,gms] --overlay-ports=<inferwire>/ports
# Features only add dependencies; the installed headers are the same for every feature set
# (a component whose dependencies are absent has no CMake target, never different headers).
set(VCPKG_BUILD_TYPE release)  # header-only: no debug variant

# The overlay builds the checkout it lives in.
get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
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
