# Defines the INTERFACE targets inferwire::<component> and the umbrella inferwire::inferwire.
# A component whose third-party packages are missing is skipped with a message; every other
# component still builds (for example, no CUDA toolkit means no inferwire::cuda/gms).
include(GNUInstallDirs)
include(inferwire_deps)

set(INFERWIRE_AVAILABLE_COMPONENTS "")
foreach(c IN LISTS INFERWIRE_COMPONENTS)
  set(ok TRUE)
  foreach(d IN LISTS INFERWIRE_COMPONENT_DEPS_${c})
    if(NOT d IN_LIST INFERWIRE_AVAILABLE_COMPONENTS)
      set(ok FALSE)
    endif()
  endforeach()
  if(ok)
    inferwire_find_component_deps(${c} find_package)
    set(ok ${INFERWIRE_DEPS_FOUND_${c}})
  endif()
  if(NOT ok)
    message(STATUS "inferwire: component '${c}' skipped (a dependency was not found)")
    continue()
  endif()

  add_library(inferwire_${c} INTERFACE)
  add_library(inferwire::${c} ALIAS inferwire_${c})
  set_target_properties(inferwire_${c} PROPERTIES EXPORT_NAME ${c})
  target_compile_features(inferwire_${c} INTERFACE cxx_std_20)
  target_include_directories(inferwire_${c} INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
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
