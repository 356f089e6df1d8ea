# SPDX-License-Identifier: Apache-2.0
# The one table of inferwire's components: what each needs, and how to find it.
# Used by the build (inferwire_targets.cmake) and, through configure_file, by the installed
# inferwireConfig.cmake, so the two can never disagree.
#
# INFERWIRE_COMPONENT_DEPS_<c>      components <c> builds on: exactly the components whose
#                                   headers <c>'s headers include (tests/include_graph.cmake
#                                   checks both ways)
# INFERWIRE_HEADER_COMPONENTS       headers that are not in their component's folder, as
#                                   <path under include/inferwire>=<component>; every other
#                                   header belongs to the component its folder names
set(INFERWIRE_COMPONENTS core v2 http grpc shm cuda gms)
set(INFERWIRE_COMPONENT_DEPS_core "")
set(INFERWIRE_COMPONENT_DEPS_v2   core)
set(INFERWIRE_COMPONENT_DEPS_http v2)
set(INFERWIRE_COMPONENT_DEPS_grpc v2)
# Regions build the v2 registration requests (register_request()).
set(INFERWIRE_COMPONENT_DEPS_shm  v2)
# CUDA IPC regions (shm/cuda_region.hpp, part of cuda) build v2 registration requests too;
# CUDA VMM regions (shm/cuda_vmm_region.hpp) hand their chunks over shm's descriptor channel.
set(INFERWIRE_COMPONENT_DEPS_cuda v2 shm)
# GMS passes descriptors as shm::unique_fd.
set(INFERWIRE_COMPONENT_DEPS_gms  core cuda shm)
set(INFERWIRE_HEADER_COMPONENTS
  core.hpp=core version.hpp=core v2.hpp=v2 http.hpp=http grpc.hpp=grpc shm.hpp=shm cuda.hpp=cuda
  gms.hpp=gms src.hpp=http shm/cuda_region.hpp=cuda shm/cuda_vmm_region.hpp=cuda)

# The component of the header at <path> (relative to include/inferwire).
function(inferwire_header_component out path)
  foreach(entry IN LISTS INFERWIRE_HEADER_COMPONENTS)
    if(entry MATCHES "^(.*)=(.*)$" AND CMAKE_MATCH_1 STREQUAL path)
      set(${out} ${CMAKE_MATCH_2} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  string(REGEX MATCH "^([a-z0-9_]+)/" m "${path}")
  set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

# Expands a list of components to itself plus everything it builds on, in dependency order.
function(inferwire_component_closure out)
  set(result "")
  set(todo ${ARGN})
  while(todo)
    list(POP_FRONT todo c)
    if(NOT c IN_LIST result)
      list(APPEND result ${c})
      list(APPEND todo ${INFERWIRE_COMPONENT_DEPS_${c}})
    endif()
  endwhile()
  set(ordered "")
  foreach(c IN LISTS INFERWIRE_COMPONENTS)
    if(c IN_LIST result)
      list(APPEND ordered ${c})
    endif()
  endforeach()
  set(${out} ${ordered} PARENT_SCOPE)
endfunction()

# Finds the third-party packages of one component (not of the ones it builds on). The macro
# named by `finder` is find_package for the build and find_dependency for consumers.
# Sets INFERWIRE_DEPS_FOUND_<c> in the caller.
macro(inferwire_find_component_deps c finder)
  set(INFERWIRE_DEPS_FOUND_${c} TRUE)
  if("${c}" STREQUAL "v2")
    cmake_language(CALL ${finder} Boost 1.81 CONFIG COMPONENTS json)
    cmake_language(CALL ${finder} OpenSSL)
    if(NOT TARGET Boost::json OR NOT TARGET OpenSSL::Crypto)
      set(INFERWIRE_DEPS_FOUND_${c} FALSE)
    endif()
  elseif("${c}" STREQUAL "http")
    cmake_language(CALL ${finder} Boost 1.81 CONFIG COMPONENTS json url)
    cmake_language(CALL ${finder} OpenSSL)
    cmake_language(CALL ${finder} ZLIB)
    cmake_language(CALL ${finder} Threads)
    if(NOT TARGET Boost::url OR NOT TARGET OpenSSL::SSL OR NOT TARGET ZLIB::ZLIB
       OR NOT TARGET Threads::Threads)
      set(INFERWIRE_DEPS_FOUND_${c} FALSE)
    endif()
  elseif("${c}" STREQUAL "grpc")
    cmake_language(CALL ${finder} Protobuf)
    cmake_language(CALL ${finder} gRPC CONFIG)
    if(NOT TARGET gRPC::grpc++ OR NOT TARGET protobuf::libprotobuf)
      set(INFERWIRE_DEPS_FOUND_${c} FALSE)
    endif()
  elseif("${c}" STREQUAL "cuda")
    cmake_language(CALL ${finder} CUDAToolkit)
    if(NOT TARGET CUDA::cudart_static)
      set(INFERWIRE_DEPS_FOUND_${c} FALSE)
    endif()
  elseif("${c}" STREQUAL "gms")
    cmake_language(CALL ${finder} Boost 1.81 CONFIG)
    # msgpack-cxx is packaged as `msgpack-cxx` (target msgpack-cxx) since 6.0, vcpkg's port
    # among them; 4.x (Debian 12) as `msgpack` with target msgpackc-cxx. Either will do.
    find_package(msgpack-cxx CONFIG QUIET)
    if(NOT TARGET msgpack-cxx)
      cmake_language(CALL ${finder} msgpack 4 CONFIG)
    endif()
    cmake_language(CALL ${finder} OpenSSL)
    cmake_language(CALL ${finder} Threads)
    if(NOT (TARGET msgpack-cxx OR TARGET msgpackc-cxx) OR NOT TARGET OpenSSL::Crypto
       OR NOT TARGET Boost::headers)
      set(INFERWIRE_DEPS_FOUND_${c} FALSE)
    endif()
  endif()
endmacro()

# The link interface of each component's target, beyond the components it builds on.
set(INFERWIRE_LINK_v2   Boost::json OpenSSL::Crypto)
set(INFERWIRE_LINK_http Boost::headers Boost::url OpenSSL::SSL OpenSSL::Crypto ZLIB::ZLIB Threads::Threads)
set(INFERWIRE_LINK_grpc gRPC::grpc++ protobuf::libprotobuf)
set(INFERWIRE_LINK_cuda CUDA::cudart_static)
set(INFERWIRE_LINK_gms  Boost::headers
    "$<IF:$<TARGET_EXISTS:msgpack-cxx>,msgpack-cxx,msgpackc-cxx>" OpenSSL::Crypto Threads::Threads)
