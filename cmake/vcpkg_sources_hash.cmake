# SPDX-License-Identifier: Apache-2.0
# inferwire_sources_hash(<checkout> <var>): SHA-256 over the files the vcpkg port installs from
# (each file's path and its own SHA-256, in sorted order), shared by cmake/vcpkg_port.cmake and
# the portfile.
function(inferwire_sources_hash source_dir out_var)
  file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${source_dir}"
       "${source_dir}/include/*" "${source_dir}/cmake/*" "${source_dir}/proto/*")
  list(APPEND files CMakeLists.txt LICENSE)
  list(SORT files)
  set(all "")
  foreach(f IN LISTS files)
    file(SHA256 "${source_dir}/${f}" h)
    string(APPEND all "${f} ${h}\n")
  endforeach()
  string(SHA256 hash "${all}")
  set(${out_var} "${hash}" PARENT_SCOPE)
endfunction()
