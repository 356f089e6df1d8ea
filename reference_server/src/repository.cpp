// SPDX-License-Identifier: Apache-2.0
#include "repository.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <set>
#include <unordered_set>

#include <google/protobuf/util/json_util.h>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

namespace inferwire::server {

namespace fs = std::filesystem;

std::string_view state_name(model_state s) noexcept {
  switch (s) {
    case model_state::ready: return "READY";
    case model_state::unavailable: return "UNAVAILABLE";
    case model_state::loading: return "LOADING";
    case model_state::unloading: return "UNLOADING";
    default: return "UNKNOWN";
  }
}

// --- versions ------------------------------------------------------------------------------

status parse_version(std::string_view s, std::int64_t& out) {
  if (s.empty()) {
    out = -1;
    return {};
  }
  auto bad = [&](std::string_view what) {
    return status{errc::invalid_arg, "failed to get model version from specified version string '" +
                                         std::string(s) + "' (details: " + std::string(what) +
                                         "), version should be an integral value > 0"};
  };
  // std::stol: leading whitespace, optional sign, digits; trailing characters are ignored.
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  std::string_view num = s.substr(i);
  if (!num.empty() && num.front() == '+') num.remove_prefix(1);
  long v = 0;
  auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
  (void)p;
  if (ec == std::errc::result_out_of_range) return bad("stol");
  if (ec != std::errc{}) return bad("stol");
  if (v < 0)
    return {errc::invalid_arg, "invalid model version specified '" + std::string(s) +
                                   "' , version should be an integral value > 0"};
  out = v;
  return {};
}

// --- repository ----------------------------------------------------------------------------

model_repository::model_repository(std::vector<fs::path> roots, control_mode mode, log_fn log,
                                   execution_context exec)
    : roots_(std::move(roots)), mode_(mode), log_(std::move(log)), exec_(exec) {}

model_repository::~model_repository() { stop_polling(); }

namespace {

// Triton's text for a version that did not load, one line of a load reply.
std::string version_failure(const std::string& name, std::int64_t version, const std::string& reason) {
  return "load failed for model '" + name + "': version " + std::to_string(version) +
         " is at UNAVAILABLE state: " + reason + ";\n";
}

bool version_dir_name(const std::string& n, std::int64_t& v) {
  if (n.empty() || n[0] == '0') return false;
  for (char c : n)
    if (c < '0' || c > '9') return false;
  auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
  (void)p;
  return ec == std::errc{};
}

std::vector<std::int64_t> version_folders(const fs::path& dir) {
  std::vector<std::int64_t> found;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(dir, ec)) {
    std::int64_t v = 0;
    if (d.is_directory(ec) && version_dir_name(d.path().filename().string(), v)) found.push_back(v);
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<std::int64_t> apply_policy(const inference::ModelVersionPolicy& policy,
                                       const std::vector<std::int64_t>& found) {
  std::vector<std::int64_t> chosen;
  if (policy.has_all()) {
    chosen = found;
  } else if (policy.has_specific()) {
    for (auto v : policy.specific().versions())
      if (std::binary_search(found.begin(), found.end(), v)) chosen.push_back(v);
    std::sort(chosen.begin(), chosen.end());
    chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  } else {
    std::size_t n = policy.has_latest() ? policy.latest().num_versions() : 1;
    std::size_t first = found.size() > n ? found.size() - n : 0;
    chosen.assign(found.begin() + static_cast<std::ptrdiff_t>(first), found.end());
  }
  return chosen;
}

// What decides "changed" for a reload: the effective configuration and every file of the
// chosen version folders (name, size, modification time).
std::string fingerprint(const model_config& c, const fs::path& dir,
                        const std::vector<std::int64_t>& versions) {
  std::string f = c.json;
  std::error_code ec;
  for (auto v : versions) {
    f += "\n#" + std::to_string(v);
    std::vector<std::string> files;
    for (auto it = fs::recursive_directory_iterator(dir / std::to_string(v), ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      std::error_code e2;
      if (!it->is_regular_file(e2)) continue;
      auto t = fs::last_write_time(it->path(), e2).time_since_epoch().count();
      files.push_back(it->path().string() + ":" + std::to_string(it->file_size(e2)) + ":" +
                      std::to_string(t));
    }
    std::sort(files.begin(), files.end());
    for (const auto& x : files) f += "\n" + x;
  }
  return f;
}

}  // namespace

model_repository::located model_repository::locate(const std::string& name) const {
  located l;
  for (const auto& root : roots_) {
    std::error_code ec;
    fs::path p = root / name;
    if (fs::is_directory(p, ec)) {
      if (l.count == 0) l.dir = p;
      ++l.count;
    }
  }
  return l;
}

std::vector<std::string> model_repository::scan_names() const {
  std::set<std::string> names;
  for (const auto& root : roots_) {
    std::error_code ec;
    for (const auto& d : fs::directory_iterator(root, ec)) {
      std::error_code e2;
      if (d.is_directory(e2)) names.insert(d.path().filename().string());
    }
    if (ec) log_(true, "failed to read model repository '" + root.string() + "': " + ec.message());
  }
  return {names.begin(), names.end()};
}

// Waits (bounded) until no request holds the old versions any more.
void model_repository::drain(std::vector<std::shared_ptr<model_version>> old) {
  // Requests queued for a batch run now: no new request reaches these versions to fill it.
  for (const auto& v : old) v->instances.flush();
  std::vector<std::weak_ptr<model_version>> weak(old.begin(), old.end());
  old.clear();
  const auto deadline = clock::now() + std::chrono::seconds(60);
  for (const auto& w : weak)
    while (!w.expired() && clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

bool model_repository::leads_to(const std::string& from, const std::string& target) const {
  std::shared_lock lock(mu_);
  std::vector<const std::string*> todo{&from};
  std::unordered_set<std::string_view> seen{from};
  while (!todo.empty()) {
    auto it = models_.find(*todo.back());
    todo.pop_back();
    if (it == models_.end()) continue;
    const model_entry& e = it->second;
    if (std::none_of(e.versions.begin(), e.versions.end(), [](const version_record& v) { return v.live != nullptr; }))
      continue;
    for (const auto& d : e.dependencies) {
      if (d == target) return true;
      if (seen.insert(d).second) todo.push_back(&d);
    }
  }
  return false;
}

namespace {
// The models whose loads are in progress on this thread, outermost first: an ensemble loads its
// missing steps within its own load, so a cycle of ensembles on disk (a -> b -> a) recursed
// until the stack ran out.
thread_local std::vector<std::string_view> loading_chain;
}  // namespace

// Whatever goes wrong while loading one model (an exception from a parser, an allocation,
// a backend) fails that model, with the reason in its index entry; never the server.
status model_repository::load_locked(const std::string& name,
                                     const std::optional<std::string>& config_override,
                                     const fs::path& files_dir, bool as_dependency) {
  loading_chain.push_back(name);
  struct leave {
    ~leave() { loading_chain.pop_back(); }
  } on_return;
  std::string why;
  try {
    return load_locked_unguarded(name, config_override, files_dir, as_dependency);
  } catch (const std::exception& e) {
    why = quote_input(e.what());
  } catch (...) {
    why = "unknown error";
  }
  {
    change_lock lock(mu_);
    auto& e = models_[name];
    e.name = name;
    if (e.versions.empty()) e.error = why;
  }
  log_(true, "failed to load '" + name + "': " + why);
  return {errc::invalid_arg, "failed to load '" + name + "', " + why};
}

status model_repository::load_locked_unguarded(const std::string& name,
                                               const std::optional<std::string>& config_override,
                                               const fs::path& files_dir, bool as_dependency) {
  const std::string poll_failed = "failed to load '" + name + "', failed to poll from model repository";
  fs::path dir = files_dir;
  if (dir.empty()) {
    located l = locate(name);
    if (l.count == 0) return {errc::internal, poll_failed};
    if (l.count > 1) {
      change_lock lock(mu_);
      auto& e = models_[name];
      e.name = name;
      e.error = "model appears in two or more repositories";
      return {errc::invalid_arg, "failed to load '" + name + "', " + e.error};
    }
    dir = l.dir;
  }

  // Configuration: the override, or config.pbtxt.
  auto config = std::make_shared<model_config>();
  status st;
  if (config_override) {
    inference::ModelConfig proto;
    google::protobuf::util::JsonParseOptions opts;
    auto ps = google::protobuf::util::JsonStringToMessage(*config_override, &proto, opts);
    if (!ps.ok())
      st = {errc::invalid_arg, "failed to load '" + name + "', Invalid config override: " +
                                   std::string(ps.message())};
    else {
      // An override that leaves out what names the model (Triton's model-control examples load
      // `simple` with {"max_batch_size": 16}) takes it from the model's own files, as Triton
      // completes a configuration from the model: here, from its config.pbtxt: the backend or
      // platform when it names neither, the inputs and outputs when it lists none.
      const bool no_backend = proto.backend().empty() && proto.platform().empty();
      const bool no_tensors = proto.input_size() == 0 && proto.output_size() == 0;
      if (no_backend || no_tensors) {
        model_config on_disk;
        if (!load_model_config(dir, name, on_disk)) {
          if (no_backend) {
            proto.set_backend(on_disk.proto.backend());
            proto.set_platform(on_disk.proto.platform());
          }
          if (no_tensors) {
            *proto.mutable_input() = on_disk.proto.input();
            *proto.mutable_output() = on_disk.proto.output();
          }
        }
      }
      st = finalize_config(std::move(proto), name, dir, *config);
    }
  } else {
    st = load_model_config(dir, name, *config);
  }
  if (!st && config->proto.platform() == "ensemble" &&
      config->proto.ensemble_scheduling().step_size() == 0)
    st = {errc::invalid_arg, "ensemble '" + name + "' must have at least one step"};
  if (!st && config->proto.platform() != "ensemble" && config->backend.empty())
    st = {errc::invalid_arg, "model '" + name + "' names no backend"};
  const auto found = st ? std::vector<std::int64_t>{} : version_folders(dir);
  const auto chosen = st ? std::vector<std::int64_t>{} : apply_policy(config->proto.version_policy(), found);
  if (!st && chosen.empty()) st = {errc::internal, "failed to load '" + name + "', no version is available"};
  if (st) {
    change_lock lock(mu_);
    auto& e = models_[name];
    e.name = name;
    if (e.versions.empty()) e.error = st.message();
    if (!st.message().starts_with("failed to load"))
      st = {st.code(), "failed to load '" + name + "', " + st.message()};
    return st;
  }

  const std::string fp = fingerprint(*config, dir, chosen);
  {
    change_lock lock(mu_);
    auto it = models_.find(name);
    if (it != models_.end() && !config_override && files_dir.empty() && it->second.fingerprint == fp) {
      bool all_live = !it->second.versions.empty();
      for (const auto& v : it->second.versions)
        if (std::binary_search(chosen.begin(), chosen.end(), v.version) && !v.live) all_live = false;
      if (all_live) {
        // Unchanged: a load is a no-op, except that an explicit load makes the model the
        // user's own (no longer a dependency that unload_dependents may take away).
        if (!as_dependency) it->second.as_dependency = false;
        return {};
      }
    }
  }

  // Ensembles: their composing models first, as dependencies.
  std::vector<std::string> deps;
  std::string dep_error;
  if (config->proto.platform() == "ensemble") {
    for (const auto& step : config->proto.ensemble_scheduling().step()) {
      if (std::find(deps.begin(), deps.end(), step.model_name()) != deps.end()) continue;
      deps.push_back(step.model_name());
      if (step.model_name() == name) {
        dep_error = "ensemble '" + name + "' cannot use itself as a step";
        break;
      }
      if (std::find(loading_chain.begin(), loading_chain.end(), step.model_name()) != loading_chain.end()) {
        dep_error = "ensemble '" + name + "' would form a cycle through its step '" + step.model_name() + "'";
        break;
      }
      if (loading_chain.size() > static_cast<std::size_t>(max_ensemble_depth)) {
        dep_error = "ensemble '" + name + "' is nested deeper than " + std::to_string(max_ensemble_depth) + " ensembles";
        break;
      }
      status fs_;
      if (find(step.model_name(), "", fs_)) continue;
      if (auto ds = load_locked(step.model_name(), std::nullopt, {}, true)) {
        dep_error = "composing model '" + step.model_name() + "' failed to load: " + ds.message();
        break;
      }
    }
    // A loaded ensemble may already lead back here: reloading A as A -> B, where B -> A, made a
    // cycle that every request to A or B would have run around.
    if (dep_error.empty())
      for (const auto& d : deps)
        if (leads_to(d, name)) {
          dep_error = "ensemble '" + name + "' would form a cycle through its step '" + d + "'";
          break;
        }
  }

  std::vector<version_record> fresh;
  for (auto v : chosen) {
    auto mv = std::make_shared<model_version>();
    mv->name = name;
    mv->version = v;
    mv->config = config;
    // A model's own buckets for the first-response histogram (model_metrics, as in Triton).
    for (const auto& m : config->proto.model_metrics().metric_control())
      if (m.metric_identifier().family() == "nv_inference_first_response_histogram_ms" && m.has_histogram_options())
        mv->stats.first_response_buckets({m.histogram_options().buckets().begin(), m.histogram_options().buckets().end()});
    std::size_t instances = 0;
    for (const auto& g : config->proto.instance_group())
      instances += static_cast<std::size_t>(std::max(1, g.count()));
    status bs;
    if (!dep_error.empty()) bs = {errc::invalid_arg, dep_error};
    else if (config->proto.platform() == "ensemble") mv->impl = make_ensemble_backend(*this, *config, bs);
    else mv->impl = make_backend(*config, {dir, v, !files_dir.empty()}, bs);
    if (!bs && mv->impl)
      mv->instances.configure(instances, *config, mv->impl->on_gpu(), mv->stats, exec_,
                              std::shared_ptr<instance_gate>(mv, &mv->instances), &mv->sequences,
                              mv->impl.get());
    version_record r;
    r.version = v;
    if (bs) {
      r.state = model_state::unavailable;
      r.reason = bs.message();
    } else {
      r.state = model_state::ready;
      r.live = std::move(mv);
    }
    fresh.push_back(std::move(r));
  }

  // A reload whose new versions do not all load leaves the model as it was, serving (as
  // Triton keeps a loaded model whose reload fails); the load reply and the log say why.
  if (std::any_of(fresh.begin(), fresh.end(), [](const version_record& r) { return r.state != model_state::ready; })) {
    std::string failures;
    for (const auto& r : fresh)
      if (r.state != model_state::ready) {
        failures += version_failure(name, r.version, r.reason);
        log_(true, "failed to load '" + name + "' version " + std::to_string(r.version) + ": " + r.reason);
      }
    change_lock lock(mu_);
    auto it = models_.find(name);
    const bool serving = it != models_.end() && std::any_of(it->second.versions.begin(), it->second.versions.end(),
                                                            [](const version_record& r) { return r.live != nullptr; });
    if (serving) {
      log_(true, "the reload of '" + name + "' failed; the versions loaded before keep serving");
      return {errc::invalid_arg, failures};
    }
  }

  // Swap: new versions serve at once; versions that leave drain, then read as unloaded.
  std::vector<std::shared_ptr<model_version>> leaving;
  std::vector<std::int64_t> leaving_numbers;
  {
    change_lock lock(mu_);
    auto& e = models_[name];
    e.name = name;
    e.error.clear();
    e.fingerprint = fp;
    e.from_files = !files_dir.empty();
    e.as_dependency = as_dependency && (e.versions.empty() || e.as_dependency);
    e.dependencies = deps;
    for (auto& old : e.versions) {
      if (old.live) leaving.push_back(old.live);
      bool kept = std::any_of(fresh.begin(), fresh.end(),
                              [&](const version_record& r) { return r.version == old.version; });
      if (!kept) {
        old.state = old.live ? model_state::unloading : old.state;
        old.live.reset();
        if (old.state == model_state::unloading) leaving_numbers.push_back(old.version);
        fresh.push_back(std::move(old));
      }
    }
    std::sort(fresh.begin(), fresh.end(),
              [](const version_record& a, const version_record& b) { return a.version < b.version; });
    e.versions = std::move(fresh);
  }
  drain(std::move(leaving));
  {
    change_lock lock(mu_);
    auto& e = models_[name];
    for (auto& r : e.versions)
      if (std::find(leaving_numbers.begin(), leaving_numbers.end(), r.version) != leaving_numbers.end() &&
          r.state == model_state::unloading) {
        r.state = model_state::unavailable;
        r.reason = "unloaded";
      }
  }

  std::string failures;
  {
    std::shared_lock lock(mu_);
    for (const auto& r : versions_of(name))
      if (std::binary_search(chosen.begin(), chosen.end(), r.version) && r.state != model_state::ready) {
        failures += version_failure(name, r.version, r.reason);
        log_(true, "failed to load '" + name + "' version " + std::to_string(r.version) + ": " + r.reason);
      } else if (std::binary_search(chosen.begin(), chosen.end(), r.version)) {
        log_(false, "successfully loaded '" + name + "' version " + std::to_string(r.version));
      }
  }
  if (!failures.empty()) return {errc::invalid_arg, failures};
  return {};
}

// A model with no folder in any repository, which existed only through its `file:` parameters,
// cannot be loaded again without them: once no version of it is live (unloaded, or a first
// load that failed) it leaves the index, so that ever new names a client tries do not grow the
// server for good. Models on disk keep their unloaded and failed states listed.
void model_repository::forget_if_files_only(const std::string& name) {
  if (locate(name).count != 0) return;
  change_lock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return;
  const auto& e = it->second;
  const bool live = std::any_of(e.versions.begin(), e.versions.end(),
                                [](const version_record& r) { return r.live != nullptr; });
  if (!live && (e.from_files || e.versions.empty())) models_.erase(it);
}

status model_repository::unload_locked(const std::string& name, bool unload_dependents) {
  std::vector<std::shared_ptr<model_version>> leaving;
  std::vector<std::string> deps;
  {
    change_lock lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return {};  // unknown: a no-op success
    for (auto& r : it->second.versions)
      if (r.live) {
        leaving.push_back(std::move(r.live));
        r.state = model_state::unloading;
      }
    deps = it->second.dependencies;
  }
  drain(std::move(leaving));
  {
    change_lock lock(mu_);
    auto& e = models_[name];
    for (auto& r : e.versions)
      if (r.state == model_state::unloading) {
        r.state = model_state::unavailable;
        r.reason = "unloaded";
      }
    e.fingerprint.clear();
  }
  forget_if_files_only(name);
  log_(false, "successfully unloaded '" + name + "'");
  if (unload_dependents) {
    for (const auto& d : deps) {
      bool still_needed = false;
      bool was_dependency = false;
      {
        std::shared_lock lock(mu_);
        auto it = models_.find(d);
        if (it == models_.end()) continue;
        was_dependency = it->second.as_dependency;
        for (const auto& [other, e] : models_) {
          if (other == name) continue;
          bool loaded = std::any_of(e.versions.begin(), e.versions.end(),
                                    [](const version_record& r) { return r.live != nullptr; });
          if (loaded && std::find(e.dependencies.begin(), e.dependencies.end(), d) != e.dependencies.end())
            still_needed = true;
        }
      }
      if (was_dependency && !still_needed) unload_locked(d, true);
    }
  }
  std::string still;
  {
    std::shared_lock lock(mu_);
    for (const auto& r : versions_of(name))
      if (r.state == model_state::ready) still += (still.empty() ? "" : ",") + std::to_string(r.version);
  }
  if (!still.empty())
    return {errc::internal, "failed to unload '" + name + "', versions that are still available: " + still};
  return {};
}

namespace {
status check_model_name(std::string_view name) {
  bool blank = std::all_of(name.begin(), name.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
  if (blank) return {errc::invalid_arg, "Model name cannot be empty. Please enter a valid name to deploy."};
  if (name.find('/') != std::string_view::npos || name.find("..") != std::string_view::npos ||
      name.find('\\') != std::string_view::npos)
    return {errc::invalid_arg, "invalid model name '" + quote_input(name) +
                                   "', model name must not contain path traversal characters"};
  // A name that is not UTF-8 could be neither listed in JSON nor sent in a protobuf string
  // (only an HTTP URL can carry one).
  if (!valid_utf8(name))
    return {errc::invalid_arg, "invalid model name '" + quote_input(name) + "', model name must be UTF-8"};
  return {};
}

// Writes the `file:` parameters into a fresh private folder. Every path must stay inside it.
status write_override_files(const std::string& name,
                            const std::vector<std::pair<std::string, std::string>>& files,
                            fs::path& out) {
  const status poll_failed{errc::internal,
                           "failed to load '" + name + "', failed to poll from model repository"};
  char tmpl[] = "/tmp/inferwire-model-XXXXXX";
  if (!::mkdtemp(tmpl)) return poll_failed;
  fs::path root = fs::path(tmpl) / name;
  std::error_code ec;
  fs::create_directory(root, ec);
  if (ec) return poll_failed;
  out = root;
  for (const auto& [rel, contents] : files) {
    fs::path p(rel);
    bool bad = rel.empty() || p.is_absolute() || rel.find('\0') != std::string::npos;
    bool too_long = false;
    for (const auto& part : p) {
      std::string s = part.string();
      if (s == ".." || s == "." || s.empty()) bad = true;
      too_long |= s.size() > 255;  // the file system refuses it: a poll failure, as upstream reports
    }
    if (too_long && !bad) return poll_failed;
    if (bad)
      return {errc::invalid_arg, "failed to load '" + name + "', invalid file path '" + rel +
                                     "': paths must stay inside the model folder"};
    fs::path target = root / p.lexically_normal();
    fs::create_directories(target.parent_path(), ec);
    if (ec) return poll_failed;
    // O_NOFOLLOW|O_EXCL: never write through a link, never overwrite.
    int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return poll_failed;
    std::size_t done = 0;
    while (done < contents.size()) {
      ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    if (done != contents.size()) return poll_failed;
  }
  return {};
}
}  // namespace

status model_repository::load(std::string_view name_view, const v2::repository_load_request& req) {
  if (mode_ != control_mode::explicit_)
    return {errc::unavailable, "explicit model load / unload is not allowed if polling is enabled"};
  if (auto st = check_model_name(name_view)) return st;
  const std::string name(name_view);
  std::lock_guard control(control_mu_);
  fs::path files_dir;
  if (!req.files.empty()) {
    if (!req.config)
      return {errc::internal, "failed to load '" + name + "', failed to poll from model repository"};
    status st = write_override_files(name, req.files, files_dir);
    if (st) {
      std::error_code ec;
      if (!files_dir.empty()) fs::remove_all(files_dir.parent_path(), ec);
      return st;
    }
  }
  status st = load_locked(name, req.config, files_dir, false);
  if (!files_dir.empty()) {
    // Built-in backends read nothing from the model folder after loading.
    std::error_code ec;
    fs::remove_all(files_dir.parent_path(), ec);
    if (st) forget_if_files_only(name);  // a failed first load: the reply has the reason
  }
  return st;
}

status model_repository::unload(std::string_view name, bool unload_dependents) {
  if (mode_ != control_mode::explicit_)
    return {errc::unavailable, "explicit model load / unload is not allowed if polling is enabled"};
  if (auto st = check_model_name(name)) return st;
  std::lock_guard control(control_mu_);
  return unload_locked(std::string(name), unload_dependents);
}

bool model_repository::startup(const std::vector<std::string>& load_models, unsigned threads) {
  std::lock_guard control(control_mu_);
  std::vector<std::string> names;
  if (mode_ != control_mode::explicit_ ||
      (load_models.size() == 1 && load_models.front() == "*"))
    names = scan_names();
  else
    names = load_models;
  // Ensembles last, one at a time: they load the composing models they still miss, and two of
  // them may share a step. Every other model loads on its own, `threads` at a time.
  std::vector<std::string> plain, ensembles;
  for (const auto& n : names) {
    const located l = locate(n);
    model_config c;
    const bool ensemble = l.count == 1 && !load_model_config(l.dir, n, c) && c.proto.platform() == "ensemble";
    (ensemble ? ensembles : plain).push_back(n);
  }
  std::atomic<bool> ok{true};
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < plain.size();) {
      if (auto st = load_locked(plain[i], std::nullopt, {}, false)) {
        log_(true, st.message());
        ok = false;
      }
    }
  };
  std::vector<std::thread> pool;
  const std::size_t extra = std::min<std::size_t>(std::max(threads, 1u), plain.size());
  for (std::size_t t = 1; t < extra; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const auto& n : ensembles) {
    if (auto st = load_locked(n, std::nullopt, {}, false)) {
      log_(true, st.message());
      ok = false;
    }
  }
  return ok;
}

void model_repository::poll() {
  std::lock_guard control(control_mu_);
  const auto names = scan_names();
  for (const auto& n : names)
    if (auto st = load_locked(n, std::nullopt, {}, false)) log_(true, st.message());
  std::vector<std::string> gone;
  {
    std::shared_lock lock(mu_);
    for (const auto& [n, e] : models_)
      if (!e.from_files && !std::binary_search(names.begin(), names.end(), n)) gone.push_back(n);
  }
  for (const auto& n : gone) {
    bool loaded = false;
    {
      std::shared_lock lock(mu_);
      for (const auto& r : versions_of(n)) loaded |= r.live != nullptr;
    }
    if (loaded) unload_locked(n, false);
  }
}

void model_repository::start_polling(unsigned seconds) {
  poller_ = std::thread([this, seconds] {
    std::unique_lock lock(poll_mu_);
    while (!poll_cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return stop_poll_; })) {
      lock.unlock();
      try {
        poll();
      } catch (const std::exception& e) {  // a failed scan is retried at the next poll
        log_(true, "model repository poll failed: " + quote_input(e.what()));
      }
      lock.lock();
    }
  });
}

void model_repository::stop_polling() {
  {
    std::lock_guard lock(poll_mu_);
    stop_poll_ = true;
  }
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

std::vector<v2::repository_index_entry> model_repository::index(bool ready_only) const {
  std::vector<v2::repository_index_entry> out;
  std::set<std::string> names;
  std::map<std::string, int> seen;
  for (const auto& root : roots_) {
    std::error_code ec;
    for (const auto& d : fs::directory_iterator(root, ec)) {
      std::error_code e2;
      if (!d.is_directory(e2)) continue;
      auto n = d.path().filename().string();
      names.insert(n);
      ++seen[n];
    }
  }
  std::shared_lock lock(mu_);
  for (const auto& [n, e] : models_) names.insert(n);
  for (const auto& n : names) {
    auto it = models_.find(n);
    if (seen[n] > 1 && (it == models_.end() || !it->second.from_files)) {
      if (!ready_only) out.push_back({n, "", "UNAVAILABLE", "model appears in two or more repositories"});
      continue;
    }
    if (it == models_.end() || (it->second.versions.empty() && it->second.error.empty())) {
      if (!ready_only) out.push_back({n, "", "", ""});
      continue;
    }
    if (it->second.versions.empty()) {
      if (!ready_only) out.push_back({n, "", "UNAVAILABLE", it->second.error});
      continue;
    }
    for (const auto& r : it->second.versions) {
      if (ready_only && r.state != model_state::ready) continue;
      out.push_back({n, std::to_string(r.version), std::string(state_name(r.state)), r.reason});
    }
  }
  return out;
}

namespace {
// A thread's last successful lookup: the next request for the same model and version, with no
// change to any repository since, gets the same version without the lock and the search. The
// version is held weakly, so an unloaded one is not kept alive by a thread that looked it up.
struct last_lookup {
  const void* repository = nullptr;
  std::uint64_t changes = 0;  ///< the count of changes it holds for (never 0)
  std::string name, version;
  std::weak_ptr<model_version> found;
};
thread_local last_lookup last_lookup_of_thread;
}  // namespace

std::shared_ptr<model_version> model_repository::find(std::string_view name,
                                                      std::string_view version_text,
                                                      status& st) const {
  last_lookup& last = last_lookup_of_thread;
  // Read before the lock: a change made meanwhile leaves the lookup stamped as older than it.
  const std::uint64_t now = changes.load(std::memory_order_acquire);
  if (last.changes == now && last.repository == this && last.name == name && last.version == version_text)
    if (auto found = last.found.lock()) {
      st = {};
      return found;
    }
  auto found = search(name, version_text, st);
  if (found) {
    last.changes = 0;  // never current: a copy that fails on memory leaves the lookup unused
    last.repository = this;
    last.name.assign(name);
    last.version.assign(version_text);
    last.found = found;
    last.changes = now;
  }
  return found;
}

std::shared_ptr<model_version> model_repository::search(std::string_view name,
                                                        std::string_view version_text,
                                                        status& st) const {
  std::int64_t version = -1;
  if ((st = parse_version(version_text, version))) return nullptr;
  std::shared_lock lock(mu_);
  auto prefix = [&] { return "Request for unknown model: '" + quote_input(name) + "'"; };
  auto it = models_.find(name);
  if (it == models_.end() || it->second.versions.empty()) {
    st = {errc::not_found, prefix() + " is not found"};
    return nullptr;
  }
  const auto& versions = it->second.versions;
  if (version == -1) {
    for (auto v = versions.rbegin(); v != versions.rend(); ++v)
      if (v->state == model_state::ready && v->live) return v->live;
    st = {errc::not_found, prefix() + " has no available versions"};
    return nullptr;
  }
  for (const auto& v : versions) {
    if (v.version != version) continue;
    if (v.state == model_state::ready && v.live) return v.live;
    st = {errc::unavailable, prefix() + " version " + std::to_string(version) + " is not at ready state"};
    return nullptr;
  }
  st = {errc::not_found, prefix() + " version " + std::to_string(version) + " is not found"};
  return nullptr;
}

bool model_repository::ready(std::string_view name, std::string_view version) const {
  status st;
  return find(name, version, st) != nullptr;
}

std::vector<std::shared_ptr<model_version>> model_repository::ready_versions() const {
  std::shared_lock lock(mu_);
  std::vector<std::shared_ptr<model_version>> out;
  for (const auto& [name, e] : models_)
    for (const auto& v : e.versions)
      if (v.state == model_state::ready && v.live) out.push_back(v.live);
  return out;
}

std::vector<std::shared_ptr<model_version>> model_repository::stats_versions(
    std::string_view name, std::string_view version_text, status& st) const {
  std::int64_t version = -1;
  if ((st = parse_version(version_text, version))) return {};
  std::shared_lock lock(mu_);
  std::vector<std::shared_ptr<model_version>> out;
  bool any_ready = false;
  auto it = models_.find(name);
  if (it != models_.end())
    for (const auto& v : it->second.versions) {
      if (v.state != model_state::ready || !v.live) continue;
      any_ready = true;
      if (version == -1 || v.version == version) out.push_back(v.live);
    }
  if (out.empty()) {
    if (version == -1 || !any_ready)
      st = {errc::invalid_arg, "requested model '" + quote_input(name) + "' is not available"};
    else
      st = {errc::invalid_arg,
            "requested model version is not available for model '" + quote_input(name) + "'"};
  }
  return out;
}

bool model_repository::all_ready() const {
  std::shared_lock lock(mu_);
  for (const auto& [name, e] : models_) {
    if (e.versions.empty()) return false;
    for (const auto& v : e.versions)
      if (v.state != model_state::ready &&
          !(v.state == model_state::unavailable && v.reason == "unloaded"))
        return false;
  }
  return true;
}

std::vector<std::int64_t> model_repository::ready_version_numbers(std::string_view name) const {
  std::shared_lock lock(mu_);
  std::vector<std::int64_t> out;
  auto it = models_.find(name);
  if (it == models_.end()) return out;
  for (const auto& v : it->second.versions)
    if (v.state == model_state::ready && v.live) out.push_back(v.version);
  return out;
}

}  // namespace inferwire::server
