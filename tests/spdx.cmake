# SPDX-License-Identifier: Apache-2.0
# Every source file of the project names its license in its first three lines
# (SPDX-License-Identifier), as the README says: C++, CUDA, Python, shell, CMake and proto files
# under the project's source folders.
#   cmake -DSOURCE_DIR=<root> -P spdx.cmake
set(missing "")
foreach(dir include reference_server tests bench tools examples scripts proto cmake ports deploy)
  file(GLOB_RECURSE files LIST_DIRECTORIES false
       "${SOURCE_DIR}/${dir}/*.cpp" "${SOURCE_DIR}/${dir}/*.hpp" "${SOURCE_DIR}/${dir}/*.h"
       "${SOURCE_DIR}/${dir}/*.cu" "${SOURCE_DIR}/${dir}/*.py" "${SOURCE_DIR}/${dir}/*.sh"
       "${SOURCE_DIR}/${dir}/*.cmake" "${SOURCE_DIR}/${dir}/*.proto" "${SOURCE_DIR}/${dir}/CMakeLists.txt")
  foreach(f IN LISTS files)
    file(STRINGS "${f}" head LIMIT_COUNT 3)
    if(NOT head MATCHES "SPDX-License-Identifier")
      list(APPEND missing "${f}")
    endif()
  endforeach()
endforeach()
file(STRINGS "${SOURCE_DIR}/CMakeLists.txt" head LIMIT_COUNT 3)
if(NOT head MATCHES "SPDX-License-Identifier")
  list(APPEND missing "${SOURCE_DIR}/CMakeLists.txt")
endif()
if(missing)
  list(JOIN missing "\n  " text)
  message(FATAL_ERROR "files without an SPDX-License-Identifier line in their first three lines:\n  ${text}")
endif()
message(STATUS "every source file names its license")
