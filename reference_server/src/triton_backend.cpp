// SPDX-License-Identifier: Apache-2.0
#include "triton_backend.hpp"

#include "backends.hpp"
#include "call.hpp"
#include "host.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

#include <dlfcn.h>

namespace inferwire::server {

namespace th = inferwire::triton_host;
namespace fs = std::filesystem;

namespace {

// --- errors -----------------------------------------------------------------------------------


// Takes a backend's error: its status, and the error freed.
status take(TRITONSERVER_Error* e) {
  if (!e) return {};
  status st{errc_of(e->code), e->message};
  TRITONSERVER_ErrorDelete(e);
  return st;
}

// --- libraries --------------------------------------------------------------------------------

struct settings_holder {
  std::mutex mu;
  backend_library_settings settings;
  logger* log = nullptr;
};
settings_holder& host() {
  static settings_holder h;
  return h;
}

void log_line(bool error, const std::string& m) {
  if (logger* l = host().log) error ? l->log_error(m) : l->log_info(m);
}

/// A backend library, loaded while a model uses it.
struct loaded_library {
  void* handle = nullptr;
  TRITONBACKEND_Backend backend;

  ~loaded_library() {
    // Past the exit timeout a backend may hang in anything it is asked: the process is ending,
    // the library stays.
    if (waits_are_interrupted()) return;
    if (backend.fn.finalize)
      if (auto st = take(backend.fn.finalize(&backend)))
        log_line(true, "backend '" + backend.name + "' failed to finalize: " + st.message());
    if (handle) dlclose(handle);
  }
};

struct library_table {
  std::mutex mu;
  std::map<std::string, std::weak_ptr<loaded_library>> by_path;
};
library_table& libraries() {
  static library_table t;
  return t;
}

template <class F>
F symbol(void* handle, const char* name) {
  return reinterpret_cast<F>(dlsym(handle, name));
}

// Loads `path` once per process (a second model of the backend shares it): dlopen, the entry
// points, TRITONBACKEND_Initialize and the backend's attributes.
std::shared_ptr<loaded_library> open_library(const std::string& name, const fs::path& path, const std::string& config,
                                             status& st) {
  library_table& t = libraries();
  std::lock_guard lock(t.mu);
  if (auto alive = t.by_path[path.string()].lock()) return alive;
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    st = {errc::not_found, std::string("unable to load shared library: ") + (why ? why : "unknown error")};
    return nullptr;
  }
  auto lib = std::make_shared<loaded_library>();
  lib->handle = handle;
  auto& fn = lib->backend.fn;
  dlerror();
  fn.execute = symbol<th::backend_entry_points::execute_fn>(handle, "TRITONBACKEND_ModelInstanceExecute");
  if (!fn.execute) {
    const char* why = dlerror();
    st = {errc::not_found, std::string("unable to find required entrypoint 'TRITONBACKEND_ModelInstanceExecute' in "
                                       "shared library: ") +
                               (why ? why : "undefined symbol")};
    lib->handle = nullptr;
    dlclose(handle);
    return nullptr;
  }
  fn.initialize = symbol<th::backend_entry_points::backend_fn>(handle, "TRITONBACKEND_Initialize");
  fn.finalize = symbol<th::backend_entry_points::backend_fn>(handle, "TRITONBACKEND_Finalize");
  fn.model_initialize = symbol<th::backend_entry_points::model_fn>(handle, "TRITONBACKEND_ModelInitialize");
  fn.model_finalize = symbol<th::backend_entry_points::model_fn>(handle, "TRITONBACKEND_ModelFinalize");
  fn.instance_initialize = symbol<th::backend_entry_points::instance_fn>(handle, "TRITONBACKEND_ModelInstanceInitialize");
  fn.instance_finalize = symbol<th::backend_entry_points::instance_fn>(handle, "TRITONBACKEND_ModelInstanceFinalize");
  fn.attributes = symbol<th::backend_entry_points::attribute_fn>(handle, "TRITONBACKEND_GetBackendAttribute");
  lib->backend.name = name;
  lib->backend.directory = path.parent_path().string();
  lib->backend.config_json = config;
  if (fn.initialize)
    if (auto e = take(fn.initialize(&lib->backend))) {
      st = e;
      lib->backend.fn.finalize = nullptr;  // never initialized: nothing to finalize
      return nullptr;                      // the destructor closes the library
    }
  if (fn.attributes)
    if (auto e = take(fn.attributes(&lib->backend, &lib->backend.attributes))) {
      st = e;
      return nullptr;
    }
  log_line(false, "loaded backend library '" + name + "' from " + path.string());
  t.by_path[path.string()] = lib;
  return lib;
}

// Where Triton looks for a model's library: <model>/<version>, <model>, <backend dir>/<backend>.
struct library_choice {
  fs::path path;
  bool in_model_folder = false;  ///< found in the model's own folder
  bool python_model = false;     ///< a model.py run by the python backend
};

bool regular_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

status find_library(const model_config& c, const model_location& where, const fs::path& backend_dir,
                    library_choice& out, bool& found) {
  found = false;
  const std::string& backend = c.backend;
  const std::vector<fs::path> paths = {where.dir / std::to_string(where.version), where.dir, backend_dir / backend};
  auto search = [&](const std::string& file, std::vector<fs::path> in) {
    for (std::size_t i = 0; i < in.size(); ++i)
      if (regular_file(in[i] / file)) {
        out.path = in[i] / file;
        out.in_model_folder = i < 2;
        return true;
      }
    return false;
  };
  const std::string runtime = c.proto.runtime();
  if (runtime.empty()) {
    found = search("libtriton_" + backend + ".so", paths);
    out.python_model = found && backend == "python";
    return {};
  }
  if (runtime.find('/') != std::string::npos || runtime == "." || runtime == "..")
    return {errc::invalid_arg, "backend library name '" + runtime + "' escapes backend directory '" +
                                   (backend_dir / backend).string() + "', for model '" + c.name +
                                   "', check model config runtime field"};
  const bool python = runtime == "model.py";
  const std::string file = python ? "libtriton_python.so" : runtime;
  std::vector<fs::path> in = paths;
  if (python) in.push_back(backend_dir / "python");
  if (!search(file, in)) {
    std::string searched;
    for (const auto& p : in) searched += "'" + p.string() + "' ";
    return {errc::invalid_arg, "unable to find backend library '" + file + "' for model '" + c.name +
                                   "', searched: " + searched};
  }
  found = true;
  out.python_model = python;
  return {};
}

// --- a model on a library ---------------------------------------------------------------------

v2::infer_output to_output(th::output_buffer&& o) {
  v2::infer_output out;
  out.name = std::move(o.name);
  out.datatype = static_cast<data_type>(o.datatype);
  out.shape.assign(o.shape.begin(), o.shape.end());
  if (o.data && o.data == static_cast<void*>(o.storage.data())) {
    out.data = v2::tensor_data::own(std::move(o.storage));  // the bytes do not move
  } else {
    // Written straight into the client's region: the response lists it without data.
    out.data = v2::tensor_data::view(std::span<const std::byte>(static_cast<const std::byte*>(o.data), o.byte_size));
  }
  return out;
}

class library_model final : public backend {
 public:
  library_model(std::shared_ptr<loaded_library> lib, const model_config& c, const model_location& where, status& st)
      : lib_(std::move(lib)), decoupled_(c.decoupled) {
    for (const auto& o : c.outputs) output_names_.push_back(o.name);
    model_.name = c.name;
    model_.version = static_cast<std::uint64_t>(where.version);
    model_.repository = where.dir.string();
    model_.config_json = c.json;
    model_.backend = &lib_->backend;
    const auto& fn = lib_->backend.fn;
    if (fn.model_initialize)
      if ((st = take(fn.model_initialize(&model_)))) return;
    model_ready_ = true;
    for (const auto& g : c.proto.instance_group()) {
      for (int k = 0; k < std::max(1, g.count()); ++k) {
        std::vector<std::pair<TRITONSERVER_InstanceGroupKind, int>> places;
        if (g.kind() == inference::ModelInstanceGroup::KIND_GPU) {
          for (int gpu : g.gpus()) places.emplace_back(TRITONSERVER_INSTANCEGROUPKIND_GPU, gpu);
        } else if (g.kind() == inference::ModelInstanceGroup::KIND_MODEL) {
          places.emplace_back(TRITONSERVER_INSTANCEGROUPKIND_MODEL, 0);
        } else {
          places.emplace_back(TRITONSERVER_INSTANCEGROUPKIND_CPU, 0);
        }
        for (const auto& [kind, device] : places) {
          auto inst = std::make_unique<TRITONBACKEND_ModelInstance>();
          inst->name = g.name() + "_" + std::to_string(k);
          inst->kind = kind;
          inst->device_id = device;
          inst->passive = g.passive();
          inst->profiles.assign(g.profile().begin(), g.profile().end());
          const std::string policy = !g.host_policy().empty() ? g.host_policy()
                                     : kind == TRITONSERVER_INSTANCEGROUPKIND_GPU ? "gpu_" + std::to_string(device)
                                     : kind == TRITONSERVER_INSTANCEGROUPKIND_MODEL ? "model"
                                                                                   : "cpu";
          boost::json::object p;
          p[policy] = boost::json::object{};
          inst->host_policy_json = boost::json::serialize(p);
          inst->model = &model_;
          if (fn.instance_initialize)
            if ((st = take(fn.instance_initialize(inst.get())))) {
              st.prefix("failed to initialize instance '" + inst->name + "': ");
              return;
            }
          free_.push_back(inst.get());
          instances_.push_back(std::move(inst));
        }
      }
    }
    if (instances_.empty()) st = {errc::invalid_arg, "model '" + c.name + "' has no instance to run on"};
  }

  ~library_model() override {
    if (waits_are_interrupted()) return;  // see ~loaded_library
    const auto& fn = lib_->backend.fn;
    for (auto& inst : instances_)
      if (fn.instance_finalize)
        if (auto st = take(fn.instance_finalize(inst.get())))
          log_line(true, "instance '" + inst->name + "' failed to finalize: " + st.message());
    if (model_ready_ && fn.model_finalize)
      if (auto st = take(fn.model_finalize(&model_)))
        log_line(true, "model '" + model_.name + "' failed to finalize: " + st.message());
  }

  bool takes_request_lists() const noexcept override { return true; }

  // Short executions of a model that is not decoupled may run on the receiving thread: a
  // hand-off to the pool and back costs more than they do. Unknown (the first few) or long
  // ones (a backend answering later from its own threads, a Python stub) go to the pool.
  bool runs_quickly() const noexcept override {
    return !decoupled_ && measured_.load(std::memory_order_relaxed) >= 8 &&
           typical_ns_.load(std::memory_order_relaxed) < quick_execution_ns;
  }

  status execute(execution& e) override {
    execution* one[] = {&e};
    status result;
    execute_list(one, std::span<status>(&result, 1));
    return result;
  }

  void execute_list(std::span<execution* const> list, std::span<status> results) override;

 private:
  TRITONBACKEND_ModelInstance* acquire() {
    std::unique_lock lock(mu_);
    free_cv_.wait(lock, [&] { return !free_.empty(); });
    auto* i = free_.back();
    free_.pop_back();
    return i;
  }
  void give_back(TRITONBACKEND_ModelInstance* i) {
    {
      std::lock_guard lock(mu_);
      free_.push_back(i);
    }
    free_cv_.notify_one();
  }

  std::shared_ptr<th::request_state> state_of(execution& e, std::optional<th::sent_response>& answer,
                                              status& decoupled_error);

  static constexpr std::uint64_t quick_execution_ns = 50'000;
  void measured(std::uint64_t ns) noexcept {
    // A moving average of the last executions (new ones weigh 1/8).
    const auto old = typical_ns_.load(std::memory_order_relaxed);
    typical_ns_.store(measured_.load(std::memory_order_relaxed) ? old - old / 8 + ns / 8 : ns, std::memory_order_relaxed);
    measured_.fetch_add(1, std::memory_order_relaxed);
  }

  std::atomic<std::uint64_t> typical_ns_{0};
  std::atomic<std::uint64_t> measured_{0};
  std::shared_ptr<loaded_library> lib_;
  TRITONBACKEND_Model model_;
  bool model_ready_ = false;
  bool decoupled_ = false;
  std::vector<std::string> output_names_;
  std::vector<std::unique_ptr<TRITONBACKEND_ModelInstance>> instances_;
  std::mutex mu_;
  std::condition_variable free_cv_;
  std::vector<TRITONBACKEND_ModelInstance*> free_;
};

// The request as the backend sees it: views of the inputs (control tensors included), the
// client's parameters, the outputs it asked for and their shared-memory destinations.
std::shared_ptr<th::request_state> library_model::state_of(execution& e, std::optional<th::sent_response>& answer,
                                                           status& decoupled_error) {
  auto s = std::make_shared<th::request_state>();
  s->decoupled = decoupled_;
  if (const v2::infer_request* r = e.request) {
    s->id = r->id;
    std::string text;
    std::uint64_t number = 0;
    bool string_id = false;
    read_sequence_id(*r, text, number, string_id);
    s->string_correlation_id = string_id;
    s->correlation_id = number;
    s->correlation_id_string = text;
    if (r->parameters.get<bool>("sequence_start").value_or(false)) s->flags |= TRITONSERVER_REQUEST_FLAG_SEQUENCE_START;
    if (r->parameters.get<bool>("sequence_end").value_or(false)) s->flags |= TRITONSERVER_REQUEST_FLAG_SEQUENCE_END;
    s->timeout_us = unsigned_parameter(*r, "timeout");
    for (const auto& [key, value] : r->parameters) {
      if (key == "sequence_id" || key == "sequence_start" || key == "sequence_end" || key == "priority" ||
          key == "timeout" || key == "binary_data_output")
        continue;
      TRITONSERVER_Parameter p;
      p.name = key;
      if (const auto* b = std::get_if<bool>(&value)) p.type = TRITONSERVER_PARAMETER_BOOL, p.boolean = *b;
      else if (const auto* i = std::get_if<std::int64_t>(&value)) p.type = TRITONSERVER_PARAMETER_INT, p.integer = *i;
      else if (const auto* u = std::get_if<std::uint64_t>(&value))
        p.type = TRITONSERVER_PARAMETER_INT, p.integer = static_cast<std::int64_t>(*u);
      else if (const auto* d = std::get_if<double>(&value)) p.type = TRITONSERVER_PARAMETER_DOUBLE, p.number = *d;
      else p.type = TRITONSERVER_PARAMETER_STRING, p.text = std::get<std::string>(value);
      s->parameters.push_back(std::move(p));
    }
    for (const auto& o : r->outputs) s->requested_outputs.push_back(o.name);
  }
  s->every_output = &output_names_;
  s->inputs.reserve(e.inputs.size());
  for (const auto& in : e.inputs) {
    auto& t = s->inputs.emplace_back();
    t.name = in.name;
    t.datatype = static_cast<TRITONSERVER_DataType>(in.datatype);
    t.shape.assign(in.shape.begin(), in.shape.end());
    const auto bytes = in.data.bytes();
    t.data = bytes.data();
    t.byte_size = bytes.size();
  }
  for (const auto& [name, place] : e.output_places)
    if (!place.on_device()) s->destinations.push_back({name, place.data, place.size});
  if (decoupled_) {
    s->deliver = [&e, &decoupled_error](th::sent_response&& r) -> std::string {
      if (r.has_error) {
        if (!decoupled_error) decoupled_error = {errc_of(r.error.code), r.error.message};
        return {};
      }
      if (r.final && r.outputs.empty()) return {};  // the end of the stream, nothing to send
      std::vector<v2::infer_output> outs;
      outs.reserve(r.outputs.size());
      for (auto& o : r.outputs) outs.push_back(to_output(std::move(o)));
      if (auto st = e.respond(std::move(outs))) return st.message();
      return {};
    };
  } else {
    s->deliver = [&answer](th::sent_response&& r) -> std::string {
      answer = std::move(r);
      return {};
    };
  }
  s->cancelled = e.cancelled;
  s->held_by_backend = s;
  return s;
}

void library_model::execute_list(std::span<execution* const> list, std::span<status> results) {
  const std::size_t n = list.size();
  std::vector<std::optional<th::sent_response>> answers(n);
  std::vector<status> decoupled_errors(n);
  std::vector<std::shared_ptr<th::request_state>> states;
  std::vector<TRITONBACKEND_Request*> handles;
  states.reserve(n);
  handles.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    states.push_back(state_of(*list[i], answers[i], decoupled_errors[i]));
    handles.push_back(&states.back()->handle);
  }
  TRITONBACKEND_ModelInstance* instance = acquire();
  const auto started = std::chrono::steady_clock::now();
  const status returned = take(lib_->backend.fn.execute(instance, handles.data(), static_cast<std::uint32_t>(n)));
  if (returned) {
    // Triton's contract: a backend that fails the execution keeps none of the requests; each
    // one it did not answer gets the error.
    for (std::size_t i = 0; i < n; ++i) {
      auto& s = *states[i];
      std::shared_ptr<th::request_state> taken_back;
      {
        std::lock_guard lock(s.mu);
        if (!s.released) {
          s.released = true;
          taken_back = std::move(s.held_by_backend);
        }
        if (!s.answered) results[i] = returned;
      }
      s.close();
    }
  } else {
    // Responses and releases may come from the backend's own threads, after it returned.
    for (auto& sp : states) {
      std::unique_lock lock(sp->mu);
      while (!sp->complete() && !waits_are_interrupted()) sp->changed.wait_for(lock, std::chrono::milliseconds(50));
    }
    for (std::size_t i = 0; i < n; ++i) {
      auto& s = *states[i];
      th::reported_times times;
      bool answered = false, released = false;
      {
        std::lock_guard lock(s.mu);
        answered = s.answered;
        released = s.released;
        times = s.times;
      }
      s.close();  // from here on nothing the backend sends reaches this request
      if (!answered) {
        results[i] = !released && waits_are_interrupted()
                         ? status{errc::unavailable, "the server is shutting down and the backend did not answer in time"}
                     : decoupled_ ? status{errc::internal, "the backend released the request without its final response"}
                                  : status{errc::internal, "the backend released the request without sending a response"};
        continue;
      }
      if (decoupled_) {
        if (decoupled_errors[i]) results[i] = std::move(decoupled_errors[i]);
      } else if (answers[i] && answers[i]->has_error) {
        results[i] = {errc_of(answers[i]->error.code), answers[i]->error.message};
      } else if (answers[i]) {
        auto& outs = list[i]->outputs;
        outs.clear();
        outs.reserve(answers[i]->outputs.size());
        for (auto& o : answers[i]->outputs) outs.push_back(to_output(std::move(o)));
      }
      if (times.set && times.compute_start_ns >= times.exec_start_ns && times.compute_end_ns >= times.compute_start_ns &&
          times.exec_end_ns >= times.compute_end_ns) {
        auto& split = list[i]->split;
        split.set = true;
        split.input_ns = times.compute_start_ns - times.exec_start_ns;
        split.infer_ns = times.compute_end_ns - times.compute_start_ns;
        split.output_ns = times.exec_end_ns - times.compute_end_ns;
      }
    }
  }
  measured(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started).count()));
  give_back(instance);
}

// --- the loader make_backend() calls ----------------------------------------------------------

std::unique_ptr<backend> load_library_model(const model_config& c, const model_location& where, status& st,
                                            bool& found) {
  backend_library_settings settings;
  {
    std::lock_guard lock(host().mu);
    settings = host().settings;
  }
  library_choice choice;
  if ((st = find_library(c, where, settings.directory, choice, found))) {
    found = true;
    return nullptr;
  }
  if (!found) return nullptr;
  if (where.from_request_files && !settings.allow_model_file_code && (choice.in_model_folder || choice.python_model)) {
    st = {errc::invalid_arg, "model '" + c.name + "' came with its files in the load request, and serving it would run code " +
                                 (choice.in_model_folder ? "they contain (a backend library)" : "they contain (model.py)") +
                                 "; the server refuses that unless it runs with --allow-model-file-code=true"};
    return nullptr;
  }
  const std::string name = choice.python_model ? "python" : c.backend;
  auto lib = open_library(name, choice.path, backend_config_json(settings, name), st);
  if (!lib) return nullptr;
  auto m = std::make_unique<library_model>(std::move(lib), c, where, st);
  if (st) return nullptr;
  return m;
}

}  // namespace

errc errc_of(TRITONSERVER_Error_Code c) noexcept {
  switch (c) {
    case TRITONSERVER_ERROR_INTERNAL: return errc::internal;
    case TRITONSERVER_ERROR_NOT_FOUND: return errc::not_found;
    case TRITONSERVER_ERROR_INVALID_ARG: return errc::invalid_arg;
    case TRITONSERVER_ERROR_UNAVAILABLE: return errc::unavailable;
    case TRITONSERVER_ERROR_UNSUPPORTED: return errc::unsupported;
    case TRITONSERVER_ERROR_ALREADY_EXISTS: return errc::already_exists;
    case TRITONSERVER_ERROR_CANCELLED: return errc::cancelled;
    default: return errc::unknown;
  }
}

TRITONSERVER_Error_Code code_of(errc e) noexcept {
  for (int c = TRITONSERVER_ERROR_UNKNOWN; c <= TRITONSERVER_ERROR_CANCELLED; ++c)
    if (errc_of(static_cast<TRITONSERVER_Error_Code>(c)) == e) return static_cast<TRITONSERVER_Error_Code>(c);
  return TRITONSERVER_ERROR_UNKNOWN;
}

std::string backend_config_json(const backend_library_settings& settings, const std::string& backend) {
  // Triton's defaults and the global settings, then the backend's own (later ones win).
  boost::json::object cmdline;
  cmdline["backend-directory"] = settings.directory.string();
  cmdline["min-compute-capability"] = "6.000000";
  cmdline["auto-complete-config"] = "false";
  cmdline["default-max-batch-size"] = "4";
  for (const auto& [b, kv] : settings.config)
    if (b.empty()) cmdline[kv.first] = kv.second;
  for (const auto& [b, kv] : settings.config)
    if (b == backend) cmdline[kv.first] = kv.second;
  boost::json::object config;
  config["cmdline"] = std::move(cmdline);
  return boost::json::serialize(config);
}

void enable_backend_libraries(backend_library_settings settings, logger& log) {
  {
    std::lock_guard lock(host().mu);
    host().settings = std::move(settings);
    host().log = &log;
  }
  th::set_log_sink({[&log](TRITONSERVER_LogLevel level, std::string_view file, int line, std::string_view message) {
                      std::string m;
                      m.reserve(file.size() + message.size() + 16);
                      m.append(file).append(":").append(std::to_string(line)).append(": ").append(message);
                      switch (level) {
                        case TRITONSERVER_LOG_ERROR: log.log_error(m); break;
                        case TRITONSERVER_LOG_WARN: log.log_warning(m); break;
                        case TRITONSERVER_LOG_VERBOSE: log.log_verbose(1, m); break;
                        default: log.log_info(m);
                      }
                    },
                    [&log](TRITONSERVER_LogLevel level) {
                      switch (level) {
                        case TRITONSERVER_LOG_ERROR: return log.error.load();
                        case TRITONSERVER_LOG_WARN: return log.warning.load();
                        case TRITONSERVER_LOG_VERBOSE: return log.verbose.load() >= 1;
                        default: return log.info.load();
                      }
                    }});
  set_library_loader(&load_library_model);
}

}  // namespace inferwire::server
