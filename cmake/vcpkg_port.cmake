# SPDX-License-Identifier: Apache-2.0
# Writes an overlay port for this checkout whose ABI hash changes with the sources:
#
#   cmake -DOUT=<dir> [-DSOURCE_DIR=<checkout>] -P <checkout>/cmake/vcpkg_port.cmake
#   vcpkg install "inferwire[http]" --overlay-ports=<dir>
#
# vcpkg keys its binary cache on the files of a port's folder, not on the sources a port
# builds: installed straight from <checkout>/ports, an edited checkout comes back from the cache
# unchanged. <dir>/inferwire is ports/inferwire plus `sources.sha256`, a hash of every file the
# port installs from (include/, cmake/, proto/, CMakeLists.txt, LICENSE), and `source-dir.txt`,
# the checkout to build: any edit changes the port's ABI hash, and so the cache entry. Run it
# again after each edit (the portfile refuses a checkout that no longer matches the hash).
cmake_minimum_required(VERSION 3.25)
if(NOT DEFINED OUT)
  message(FATAL_ERROR "vcpkg_port.cmake: set -DOUT=<folder for the overlay port>")
endif()
if(NOT DEFINED SOURCE_DIR)
  get_filename_component(SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()
include("${CMAKE_CURRENT_LIST_DIR}/vcpkg_sources_hash.cmake")
inferwire_sources_hash("${SOURCE_DIR}" hash)
set(port "${OUT}/inferwire")
file(REMOVE_RECURSE "${port}")
file(COPY "${SOURCE_DIR}/ports/inferwire/" DESTINATION "${port}")
file(WRITE "${port}/sources.sha256" "${hash}\n")
file(WRITE "${port}/source-dir.txt" "${SOURCE_DIR}\n")
message(STATUS "overlay port for ${SOURCE_DIR} (sources ${hash}): --overlay-ports=${OUT}")
