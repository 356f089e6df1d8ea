// SPDX-License-Identifier: Apache-2.0
// libtritonserver.so, part 4: the TRITONBACKEND_* functions on a backend, a model and a model
// instance: names, configuration, state pointers, attributes and the statistics a backend reports.
#include "host.hpp"

#include <boost/json/parse.hpp>

using inferwire::triton_host::make_error;
using inferwire::triton_host::null_argument;
using inferwire::triton_host::out_of_bounds;

namespace {

TRITONBACKEND_MemoryManager the_memory_manager;

// Configuration version 1 is the only one Triton defines.
TRITONSERVER_Error* check_config_version(uint32_t v) {
  if (v != 1)
    return make_error(TRITONSERVER_ERROR_UNSUPPORTED,
                      "model configuration version " + std::to_string(v) + " is not supported, only version 1 is");
  return nullptr;
}

}  // namespace

extern "C" {

// --- backend ----------------------------------------------------------------------------------

TRITONSERVER_Error* TRITONBACKEND_BackendName(TRITONBACKEND_Backend* backend, const char** name) {
  IW_REQUIRE(backend && name);
  *name = backend->name.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendConfig(TRITONBACKEND_Backend* backend, TRITONSERVER_Message** config) {
  IW_REQUIRE(backend && config);
  *config = new TRITONSERVER_Message{backend->config_json};
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendExecutionPolicy(TRITONBACKEND_Backend* backend,
                                                         TRITONBACKEND_ExecutionPolicy* policy) {
  return inferwire::triton_host::read_field(backend, &TRITONBACKEND_Backend::policy, policy);
}

TRITONSERVER_Error* TRITONBACKEND_BackendSetExecutionPolicy(TRITONBACKEND_Backend* backend,
                                                            TRITONBACKEND_ExecutionPolicy policy) {
  IW_REQUIRE(backend);
  backend->policy = policy;  // both policies run as BLOCKING: one execution per instance at a time
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendArtifacts(TRITONBACKEND_Backend* backend,
                                                   TRITONBACKEND_ArtifactType* artifact_type, const char** location) {
  IW_REQUIRE(backend && artifact_type && location);
  *artifact_type = TRITONBACKEND_ARTIFACT_FILESYSTEM;
  *location = backend->directory.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendMemoryManager(TRITONBACKEND_Backend* backend,
                                                       TRITONBACKEND_MemoryManager** manager) {
  IW_REQUIRE(backend && manager);
  *manager = &the_memory_manager;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendState(TRITONBACKEND_Backend* backend, void** state) {
  return inferwire::triton_host::read_field(backend, &TRITONBACKEND_Backend::state, state);
}

TRITONSERVER_Error* TRITONBACKEND_BackendSetState(TRITONBACKEND_Backend* backend, void* state) {
  return inferwire::triton_host::write_field(backend, &TRITONBACKEND_Backend::state, state);
}

TRITONSERVER_Error* TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(
    TRITONBACKEND_BackendAttribute* attributes, const TRITONSERVER_InstanceGroupKind kind, const uint64_t count,
    const uint64_t* device_ids, const uint64_t id_count) {
  IW_REQUIRE(attributes && (device_ids || id_count == 0));
  attributes->preferred_groups.push_back({kind, count, std::vector<uint64_t>(device_ids, device_ids + id_count)});
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendAttributeSetParallelModelInstanceLoading(
    TRITONBACKEND_BackendAttribute* attributes, bool enabled) {
  return inferwire::triton_host::write_field(attributes, &TRITONBACKEND_BackendAttribute::parallel_instance_loading, enabled);
}

// --- model ------------------------------------------------------------------------------------

TRITONSERVER_Error* TRITONBACKEND_ModelName(TRITONBACKEND_Model* model, const char** name) {
  IW_REQUIRE(model && name);
  *name = model->name.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelVersion(TRITONBACKEND_Model* model, uint64_t* version) {
  return inferwire::triton_host::read_field(model, &TRITONBACKEND_Model::version, version);
}

TRITONSERVER_Error* TRITONBACKEND_ModelRepository(TRITONBACKEND_Model* model, TRITONBACKEND_ArtifactType* artifact_type,
                                                  const char** location) {
  IW_REQUIRE(model && artifact_type && location);
  *artifact_type = TRITONBACKEND_ARTIFACT_FILESYSTEM;
  *location = model->repository.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelConfig(TRITONBACKEND_Model* model, const uint32_t config_version,
                                              TRITONSERVER_Message** model_config) {
  IW_REQUIRE(model && model_config);
  if (auto* e = check_config_version(config_version)) return e;
  *model_config = new TRITONSERVER_Message{model->config_json};
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelAutoCompleteConfig(TRITONBACKEND_Model* model, bool* auto_complete_config) {
  IW_REQUIRE(model && auto_complete_config);
  *auto_complete_config = false;  // configurations are complete: the server never fills them in
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelSetConfig(TRITONBACKEND_Model* model, const uint32_t config_version,
                                                 TRITONSERVER_Message* model_config) {
  IW_REQUIRE(model && model_config);
  if (auto* e = check_config_version(config_version)) return e;
  boost::system::error_code ec;
  auto v = boost::json::parse(model_config->json, ec);
  if (ec || !v.is_object())
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "the model configuration is not a JSON object");
  // What the backend hands back is what it reads from now on; the server keeps scheduling by
  // the configuration it loaded (docs/backends.md: no auto-completion).
  model->config_json = model_config->json;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelServer(TRITONBACKEND_Model* model, TRITONSERVER_Server** server) {
  IW_REQUIRE(model && server);
  *server = &model->server;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelBackend(TRITONBACKEND_Model* model, TRITONBACKEND_Backend** backend) {
  return inferwire::triton_host::read_field(model, &TRITONBACKEND_Model::backend, backend);
}

TRITONSERVER_Error* TRITONBACKEND_ModelState(TRITONBACKEND_Model* model, void** state) {
  return inferwire::triton_host::read_field(model, &TRITONBACKEND_Model::state, state);
}

TRITONSERVER_Error* TRITONBACKEND_ModelSetState(TRITONBACKEND_Model* model, void* state) {
  return inferwire::triton_host::write_field(model, &TRITONBACKEND_Model::state, state);
}

TRITONSERVER_Error* TRITONBACKEND_ModelReportMemoryUsage(TRITONBACKEND_Model* model, TRITONSERVER_BufferAttributes**,
                                                         uint32_t) {
  IW_REQUIRE(model);
  return nullptr;  // memory usage is not part of this server's statistics; the report is accepted
}

// --- model instance ---------------------------------------------------------------------------

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceName(TRITONBACKEND_ModelInstance* instance, const char** name) {
  IW_REQUIRE(instance && name);
  *name = instance->name.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceKind(TRITONBACKEND_ModelInstance* instance,
                                                    TRITONSERVER_InstanceGroupKind* kind) {
  return inferwire::triton_host::read_field(instance, &TRITONBACKEND_ModelInstance::kind, kind);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceDeviceId(TRITONBACKEND_ModelInstance* instance, int32_t* device_id) {
  return inferwire::triton_host::read_field(instance, &TRITONBACKEND_ModelInstance::device_id, device_id);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceHostPolicy(TRITONBACKEND_ModelInstance* instance,
                                                          TRITONSERVER_Message** host_policy) {
  IW_REQUIRE(instance && host_policy);
  *host_policy = new TRITONSERVER_Message{instance->host_policy_json};
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceIsPassive(TRITONBACKEND_ModelInstance* instance, bool* is_passive) {
  return inferwire::triton_host::read_field(instance, &TRITONBACKEND_ModelInstance::passive, is_passive);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceProfileCount(TRITONBACKEND_ModelInstance* instance, uint32_t* count) {
  IW_REQUIRE(instance && count);
  *count = static_cast<uint32_t>(instance->profiles.size());
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceProfileName(TRITONBACKEND_ModelInstance* instance, const uint32_t index,
                                                           const char** profile_name) {
  IW_REQUIRE(instance && profile_name);
  if (index >= instance->profiles.size())
    return out_of_bounds(index, "instance", instance->profiles.size(), "profiles");
  *profile_name = instance->profiles[index].c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceSecondaryDeviceCount(TRITONBACKEND_ModelInstance* instance,
                                                                    uint32_t* count) {
  IW_REQUIRE(instance && count);
  *count = 0;  // instance groups of this server name no secondary devices
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceSecondaryDeviceProperties(TRITONBACKEND_ModelInstance* instance,
                                                                         uint32_t index, const char**, int64_t*) {
  IW_REQUIRE(instance);
  return make_error(TRITONSERVER_ERROR_INVALID_ARG,
                    "out of bounds index " + std::to_string(index) + ": instance has 0 secondary devices");
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceModel(TRITONBACKEND_ModelInstance* instance,
                                                     TRITONBACKEND_Model** model) {
  return inferwire::triton_host::read_field(instance, &TRITONBACKEND_ModelInstance::model, model);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceState(TRITONBACKEND_ModelInstance* instance, void** state) {
  return inferwire::triton_host::read_field(instance, &TRITONBACKEND_ModelInstance::state, state);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceSetState(TRITONBACKEND_ModelInstance* instance, void* state) {
  return inferwire::triton_host::write_field(instance, &TRITONBACKEND_ModelInstance::state, state);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportMemoryUsage(TRITONBACKEND_ModelInstance* instance,
                                                                 TRITONSERVER_BufferAttributes**, uint32_t) {
  IW_REQUIRE(instance);
  return nullptr;  // accepted; memory usage is not part of this server's statistics
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportStatistics(TRITONBACKEND_ModelInstance* instance,
                                                                TRITONBACKEND_Request* request, const bool success,
                                                                const uint64_t exec_start_ns,
                                                                const uint64_t compute_start_ns,
                                                                const uint64_t compute_end_ns,
                                                                const uint64_t exec_end_ns) {
  IW_REQUIRE(instance && request);
  auto& s = *request->state;
  std::lock_guard lock(s.mu);
  s.times = {true, success, exec_start_ns, compute_start_ns, compute_end_ns, exec_end_ns};
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportBatchStatistics(TRITONBACKEND_ModelInstance* instance,
                                                                     const uint64_t batch_size,
                                                                     const uint64_t exec_start_ns,
                                                                     const uint64_t compute_start_ns,
                                                                     const uint64_t compute_end_ns,
                                                                     const uint64_t exec_end_ns) {
  IW_REQUIRE(instance && instance->model);
  if (instance->model->on_batch_statistics)
    instance->model->on_batch_statistics(batch_size, exec_start_ns, compute_start_ns, compute_end_ns, exec_end_ns);
  return nullptr;
}

}  // extern "C"
