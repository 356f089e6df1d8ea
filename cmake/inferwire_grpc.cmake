# SPDX-License-Identifier: Apache-2.0
# inferwire_grpc_protos(<target> PROTO_DIR <dir>)
#
# Generates C++ and gRPC code from inferwire's .proto files (grpc_service.proto,
# model_config.proto, health.proto in <dir>) and compiles it into the static library <target>,
# inside the calling project's build: generated code must match the Protobuf and gRPC the
# project links, so it is never shipped precompiled. The inferwire package calls this for its
# consumers when the `grpc` component is requested (target `inferwire_grpc_proto`, linked by
# inferwire::grpc); inferwire's own build calls it on its proto/ folder.
function(inferwire_grpc_protos target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "PROTO_DIR" "")
  if(NOT arg_PROTO_DIR)
    message(FATAL_ERROR "inferwire_grpc_protos: PROTO_DIR is required")
  endif()
  set(protos
    "${arg_PROTO_DIR}/model_config.proto"
    "${arg_PROTO_DIR}/grpc_service.proto"
    "${arg_PROTO_DIR}/health.proto")
  set(out "${CMAKE_CURRENT_BINARY_DIR}/${target}_generated")
  file(MAKE_DIRECTORY "${out}")
  add_library(${target} STATIC ${protos})
  protobuf_generate(TARGET ${target} LANGUAGE cpp
    IMPORT_DIRS "${arg_PROTO_DIR}" PROTOC_OUT_DIR "${out}" APPEND_PATH)
  # gRPC code for the two files that declare services (model_config.proto declares none).
  # (No TARGET: with one, protobuf_generate takes all of the target's .proto files.)
  protobuf_generate(LANGUAGE grpc OUT_VAR grpc_generated
    PROTOS "${arg_PROTO_DIR}/grpc_service.proto" "${arg_PROTO_DIR}/health.proto"
    GENERATE_EXTENSIONS .grpc.pb.h .grpc.pb.cc
    PLUGIN "protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>"
    IMPORT_DIRS "${arg_PROTO_DIR}" PROTOC_OUT_DIR "${out}" APPEND_PATH)
  target_sources(${target} PRIVATE ${grpc_generated})
  # Both compile as one translation unit, which parses gRPC's headers once (unoptimised, 7 s
  # instead of 12). The Protobuf files stay apart: each defines the same file-static names.
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
  set_source_files_properties("${out}/grpc_service.grpc.pb.cc" "${out}/health.grpc.pb.cc"
    TARGET_DIRECTORY ${target} PROPERTIES UNITY_GROUP grpc_services)
  target_include_directories(${target} PUBLIC "$<BUILD_INTERFACE:${out}>")
  target_link_libraries(${target} PUBLIC gRPC::grpc++ protobuf::libprotobuf)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()
