# SPDX-License-Identifier: Apache-2.0
# Defines the INTERFACE targets inferwire::<component> and the umbrella inferwire::inferwire.
# A component whose third-party packages are missing is skipped with a message; every other
# component still builds (for example, no CUDA toolkit means no inferwire::cuda/gms).
include(GNUInstallDirs)
include(inferwire_deps)

# <inferwire/version.hpp>, from the version of project().
configure_file("${CMAKE_CURRENT_LIST_DIR}/version.hpp.in"
  "${PROJECT_BINARY_DIR}/include/inferwire/version.hpp" @ONLY)

# One switch per component but core (always built): INFERWIRE_WITH_<C> = AUTO (built when its
# dependencies are found; the default), ON (required: configuring fails without them) or OFF
# (neither built nor installed). Package managers set every switch to ON or OFF, so the feature
# set, not whatever happens to be installed, decides what is built.
foreach(c IN LISTS INFERWIRE_COMPONENTS)
  if(c STREQUAL "core")
    continue()
  endif()
  string(TOUPPER "${c}" C)
  set(INFERWIRE_WITH_${C} AUTO CACHE STRING
      "Component ${c}: AUTO (when its dependencies are found), ON (required) or OFF")
  set_property(CACHE INFERWIRE_WITH_${C} PROPERTY STRINGS AUTO ON OFF)
  if(NOT INFERWIRE_WITH_${C} MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "INFERWIRE_WITH_${C} must be AUTO, ON or OFF, not '${INFERWIRE_WITH_${C}}'")
  endif()
endforeach()

set(INFERWIRE_AVAILABLE_COMPONENTS "")
foreach(c IN LISTS INFERWIRE_COMPONENTS)
  string(TOUPPER "${c}" C)
  set(mode ON)
  if(DEFINED INFERWIRE_WITH_${C})
    set(mode ${INFERWIRE_WITH_${C}})
  endif()
  if(mode STREQUAL "OFF")
    message(STATUS "inferwire: component '${c}' off (INFERWIRE_WITH_${C}=OFF)")
    continue()
  endif()
  set(why "")
  foreach(d IN LISTS INFERWIRE_COMPONENT_DEPS_${c})
    if(NOT d IN_LIST INFERWIRE_AVAILABLE_COMPONENTS)
      set(why "it builds on component '${d}', which is not built")
    endif()
  endforeach()
  if(NOT why)
    inferwire_find_component_deps(${c} find_package)
    if(NOT INFERWIRE_DEPS_FOUND_${c})
      set(why "a third-party dependency was not found")
    endif()
  endif()
  if(why)
    if(mode STREQUAL "ON")
      message(FATAL_ERROR "inferwire: component '${c}' is required (INFERWIRE_WITH_${C}=ON) but ${why}")
    endif()
    message(STATUS "inferwire: component '${c}' skipped (${why})")
    continue()
  endif()

  add_library(inferwire_${c} INTERFACE)
  add_library(inferwire::${c} ALIAS inferwire_${c})
  set_target_properties(inferwire_${c} PROPERTIES EXPORT_NAME ${c})
  target_compile_features(inferwire_${c} INTERFACE cxx_std_20)
  target_include_directories(inferwire_${c} INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  foreach(d IN LISTS INFERWIRE_COMPONENT_DEPS_${c})
    target_link_libraries(inferwire_${c} INTERFACE inferwire_${d})
  endforeach()
  target_link_libraries(inferwire_${c} INTERFACE ${INFERWIRE_LINK_${c}})
  list(APPEND INFERWIRE_AVAILABLE_COMPONENTS ${c})
endforeach()

if(TARGET inferwire_gms)
  # Keeps Boost out of msgpack-cxx; our Asio use is explicit.
  target_compile_definitions(inferwire_gms INTERFACE MSGPACK_NO_BOOST)
endif()

add_library(inferwire_inferwire INTERFACE)
add_library(inferwire::inferwire ALIAS inferwire_inferwire)
set_target_properties(inferwire_inferwire PROPERTIES EXPORT_NAME inferwire)
foreach(c IN LISTS INFERWIRE_AVAILABLE_COMPONENTS)
  target_link_libraries(inferwire_inferwire INTERFACE inferwire_${c})
endforeach()

message(STATUS "inferwire: components ${INFERWIRE_AVAILABLE_COMPONENTS}")

# Warnings for our own targets (tests, examples, benchmarks, servers). Never -Werror by default.
add_library(inferwire_warnings INTERFACE)
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(inferwire_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>)
endif()
option(INFERWIRE_WERROR "Treat warnings as errors in inferwire's own targets" OFF)
if(INFERWIRE_WERROR)
  target_compile_options(inferwire_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
