// SPDX-License-Identifier: Apache-2.0
#include "service.hpp"

#include <inferwire/version.hpp>

#include <chrono>
#include <new>

namespace inferwire::server {

namespace {

std::uint64_t ns_since(clock::time_point t) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t).count());
}

// The core's part of a traced request: Triton's timestamps from REQUEST_START to REQUEST_END
// and, at level TENSORS, the outputs.
void stamp_request(infer_call& call) {
  trace_record& t = *call.trace;
  stamp_core(t, call.times);
  if (t.tensors)
    for (const auto& o : call.response.outputs)
      if (o.encoding != v2::tensor_encoding::shared_memory)
        t.add_tensor("TENSOR_BACKEND_OUTPUT", o.name, o.datatype, o.shape, o.data.bytes());
}

}  // namespace

// --- health and metadata ---------------------------------------------------------------------

status service::live(bool& live) const {
  live = false;
  if (s_.exiting) return {errc::unavailable, "Server exiting"};
  // A server that failed to initialise (--exit-on-error=false) answers, but is not live.
  live = !s_.failed_to_initialize;
  return {};
}

status service::accepting() const {
  if (s_.exiting || s_.failed_to_initialize) return {errc::unavailable, "Server not ready"};
  return {};
}

status service::model_ready(std::string_view name, std::string_view version, bool& ready) const {
  ready = false;
  if (auto st = accepting()) return st;
  ready = s_.repository.ready(name, version);
  return {};
}

v2::server_metadata service::server_metadata() const {
  return {s_.opts.server_id, INFERWIRE_VERSION_STRING, server_extensions()};
}

status service::model_metadata(std::string_view name, std::string_view version,
                               v2::model_metadata& md) const {
  status st;
  auto m = s_.repository.find(name, version, st);
  if (!m) return st;
  const model_config& c = *m->config;
  md = {};
  md.name = c.name;
  if (!version.empty()) {
    md.versions.push_back(std::to_string(m->version));
  } else {
    for (auto v : s_.repository.ready_version_numbers(c.name)) md.versions.push_back(std::to_string(v));
  }
  md.platform = c.platform;
  auto add = [&](const std::vector<tensor_config>& from, std::vector<v2::tensor_metadata>& to) {
    for (const auto& t : from) {
      v2::tensor_metadata tm{t.name, t.datatype, t.dims};
      if (c.batching()) tm.shape.insert(tm.shape.begin(), -1);
      to.push_back(std::move(tm));
    }
  };
  add(c.inputs, md.inputs);
  add(c.outputs, md.outputs);
  return {};
}

status service::model_configuration(std::string_view name, std::string_view version,
                                    std::shared_ptr<const model_config>& out) const {
  status st;
  auto m = s_.repository.find(name, version, st);
  if (!m) return st;
  out = m->config;
  return {};
}

status service::statistics(std::string_view name, std::string_view version,
                           v2::statistics_response& out) const {
  out.model_stats.clear();
  std::vector<std::shared_ptr<model_version>> versions;
  if (name.empty()) {
    versions = s_.repository.ready_versions();
  } else {
    status st;
    versions = s_.repository.stats_versions(name, version, st);
    if (st) return st;
  }
  for (const auto& v : versions) out.model_stats.push_back(v->stats.snapshot(v->name, v->version));
  return {};
}

// --- model repository ------------------------------------------------------------------------

status service::repository_available(std::string_view repository) const {
  if (!repository.empty()) return {errc::unsupported, "'repository_name' specification is not supported"};
  return accepting();
}

status service::repository_index(std::string_view repository, bool ready_only,
                                 std::vector<v2::repository_index_entry>& out) const {
  if (auto st = repository_available(repository)) return st;
  out = s_.repository.index(ready_only);
  return {};
}

status service::repository_load(std::string_view repository, const std::string& model,
                                const v2::repository_load_request& request) {
  if (auto st = repository_available(repository)) return st;
  status st;
  try {
    st = s_.repository.load(model, request);
  } catch (const std::exception& e) {
    st = {errc::internal, "failed to load '" + quote_input(model) + "': " + quote_input(e.what())};
  }
  // As Triton's log: a refused load leaves its reason there too, not only in the reply.
  if (st) s_.log.log_error(quote_input(st.message(), max_error_text));
  return st;
}

status service::repository_unload(std::string_view repository, const std::string& model,
                                  bool unload_dependents) {
  if (auto st = repository_available(repository)) return st;
  try {
    return s_.repository.unload(model, unload_dependents);
  } catch (const std::exception& e) {
    return {errc::internal, "failed to unload '" + quote_input(model) + "': " + quote_input(e.what())};
  }
}

// --- shared memory ---------------------------------------------------------------------------

status service::system_shm_status(std::string_view region, std::vector<v2::system_shm_status>& out) const {
  return s_.shm.system_status(region, out);
}

status service::cuda_shm_status(std::string_view region, std::vector<v2::cuda_shm_status>& out) const {
  return s_.shm.cuda_status(region, out);
}

status service::register_system_shm(const v2::system_shm_register_request& request) {
  return s_.shm.register_system(request);
}

status service::register_cuda_shm(const v2::cuda_shm_register_request& request) {
  return s_.shm.register_cuda(request);
}

status service::unregister_shm(region_kind kind, std::string_view region) {
  return s_.shm.unregister(kind, region);
}

// --- trace and log settings ------------------------------------------------------------------

status service::trace_settings(std::string_view model, const v2::trace_settings* update,
                               v2::trace_settings& out) {
  if (!model.empty() && !s_.repository.ready(model, ""))
    return {errc::invalid_arg, "Request for unknown model : " + quote_input(model)};
  if (!update) {
    out = s_.traces.get(std::string(model));
    return {};
  }
  return s_.traces.update(std::string(model), *update, out);
}

status service::log_settings(const v2::log_settings* u, v2::log_settings& out) {
  logger& l = s_.log;
  if (u) {
    if (u->log_file)
      return {errc::unsupported, "log file location can not be updated through network protocol"};
    if (u->log_format && *u->log_format != "default" && *u->log_format != "ISO8601")
      return {errc::unavailable, "invalid argument for --log_format, got: " + quote_input(*u->log_format)};
    if (u->log_info) l.info = *u->log_info;
    if (u->log_warning) l.warning = *u->log_warning;
    if (u->log_error) l.error = *u->log_error;
    if (u->log_verbose_level) l.verbose = *u->log_verbose_level;
    if (u->log_format) l.format = *u->log_format == "ISO8601" ? log_format::iso8601 : log_format::standard;
  }
  out = {};
  out.log_file = l.file();
  out.log_info = l.info.load();
  out.log_warning = l.warning.load();
  out.log_error = l.error.load();
  out.log_verbose_level = l.verbose.load();
  out.log_format = l.format == log_format::iso8601 ? "ISO8601" : "default";
  return {};
}

// --- inference -------------------------------------------------------------------------------

status service::failed(const infer_call& call, status st, std::optional<failure_reason> why) const {
  if (call.model) call.model->stats.record_failure(ns_since(call.times.received), why.value_or(reason_of(st, false)));
  return st;
}

bool service::hold(infer_call& call, std::uint64_t bytes) const {
  if (bytes == 0) return true;
  if (!call.made) call.made.emplace(s_.body_budget);
  return call.made->add(bytes);
}

bool service::hold_decoded(infer_call& call, std::uint64_t beyond) const {
  for (const auto& in : call.request.inputs)
    if (in.data.owns()) beyond += in.data.size();
  return hold(call, beyond);
}

status service::admit(infer_call& call) const {
  if (auto st = resolve_shared_memory(s_.shm, call.request, call.places)) return st;
  if (auto st = validate_request(*call.model->config, call.request, call.batch_size)) return st;
  // Whether to trace is decided once the request is valid (trace level, rate and count).
  if ((call.trace = s_.traces.begin(call.model->name))) {
    call.trace->model_version = call.model->version;
    call.trace->request_id = call.request.id;
    for (const auto& r : call.received)
      if (r.name) call.trace->stamp(r.name, r.at);
    if (call.trace->tensors)
      for (std::size_t i = 0; i < call.request.inputs.size(); ++i) {
        const auto& in = call.request.inputs[i];
        const bool device = i < call.places.inputs.size() && call.places.inputs[i].data;
        call.trace->add_tensor("TENSOR_QUEUE_INPUT", in.name, in.datatype, in.shape,
                               device ? std::span<const std::byte>() : in.data.bytes());
      }
  }
  return {};
}

infer_start service::start_infer(const std::shared_ptr<infer_call>& call, std::string_view name,
                                 std::string_view version, infer_decoder decode, infer_hooks hooks,
                                 std::function<void(status)> done) {
  infer_call& c = *call;
  // Step 1: the model version. A frontend that read the request may have stamped it already.
  if (c.times.received == clock::time_point{}) c.times.received = clock::now();
  c.in_flight.emplace(s_.in_flight);
  status st;
  c.model = s_.repository.find(name, version, st);
  if (!c.model) return {infer_start::failed, std::move(st)};
  // The frontend's steps: the body, decoded into the request.
  c.hooks = std::move(hooks);
  decoded d;
  if (auto e = guarded([&] {
        d = decode(c);
        return status{};
      }))
    d = decoded(std::move(e));
  if (d.refused) return {infer_start::refused, std::move(d.error)};
  if (d.error) return {infer_start::failed, failed(c, std::move(d.error))};
  // What decoding made, within the in-flight budget; then shared memory and validation.
  if (!hold_decoded(c, d.beyond)) return {infer_start::budget, {errc::unavailable, s_.body_budget.exhausted_text()}};
  if (auto e = guarded([&] { return admit(c); })) return {infer_start::failed, failed(c, std::move(e))};
  // The scheduler: at once, or queued.
  c.times.queued = clock::now();
  if (c.trace)
    done = [call, done = std::move(done)](status result) {
      stamp_request(*call);
      done(std::move(result));
    };
  c.done = std::move(done);
  if (c.hooks.cancelled && c.hooks.cancelled()) {
    c.finish(failed(c, cancelled_status()));
    return {};
  }
  bool scheduled = false;
  try {
    scheduled = c.model->instances.schedule(call);
  } catch (...) {  // no memory to queue it: nothing was queued
    if (c.done) c.finish(failed(c, exception_status()));
    return {};
  }
  if (!scheduled) c.finish(failed(c, {errc::unavailable, "Exceeds maximum queue size"}, failure_reason::rejected));
  return {};
}

}  // namespace inferwire::server
