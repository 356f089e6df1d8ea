# SPDX-License-Identifier: Apache-2.0
# Our own programs made of several files compile them as one translation unit (CMake's unity
# build): the files include the same heavy headers (Beast, Asio, Boost.JSON, Protobuf, Catch2)
# and instantiate the same templates, which one translation unit parses and generates once.
# Measured from an empty compiler cache on a 2-core VM: the server core's 34 files 270 s of
# compile jobs apart and 191 s together (reference_server/CMakeLists.txt: its inlining limit),
# the integration tests' eleven 149 s and 78 s, the benchmarks' ten 215 s and 76 s. Files with
# options of their own stay apart (CMake's rule); names at a file's namespace scope therefore
# differ between the files of one target.
#
# -DINFERWIRE_UNITY_BUILD=OFF compiles file by file: a rebuild after editing one file then
# compiles that file only, which is what a developer editing the server wants.
#
#   inferwire_unity_build(<target> [BY_FOLDER])
# BY_FOLDER: the files of each source subfolder are one translation unit (the unit tests'
# folders each use their own namespaces: `using namespace inferwire::v2` in one would change
# what an unqualified `encode` means in another).
option(INFERWIRE_UNITY_BUILD "compile each of our multi-file programs and libraries as one translation unit" ON)

function(inferwire_unity_build target)
  if(NOT INFERWIRE_UNITY_BUILD)
    return()
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
  if(ARGV1 STREQUAL "BY_FOLDER")
    set_target_properties(${target} PROPERTIES UNITY_BUILD_MODE GROUP)
    get_target_property(sources ${target} SOURCES)
    foreach(f IN LISTS sources)
      if(f MATCHES "^([a-z_0-9]+)/[^/]+\\.cpp$")
        set_source_files_properties(${f} TARGET_DIRECTORY ${target} PROPERTIES UNITY_GROUP ${CMAKE_MATCH_1})
      endif()
    endforeach()
  else()
    # A precompiled header serves the translation units of a target; made one, the target only
    # pays for writing it (the server's unit tests: 5 s to write, 1 s saved reading it back). It
    # stays for the file-by-file build and for BY_FOLDER's several units.
    set_target_properties(${target} PROPERTIES DISABLE_PRECOMPILE_HEADERS ON)
  endif()
endfunction()
