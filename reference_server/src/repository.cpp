#include "repository.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

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

// --- statistics ----------------------------------------------------------------------------

namespace {
std::uint64_t now_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}
void add(v2::statistic_duration& d, std::uint64_t ns, std::uint64_t count = 1) {
  d.count += count;
  d.ns += ns;
}
}  // namespace

void version_stats::record_success(std::uint64_t batch_size, const durations& d) {
  std::lock_guard lock(mu_);
  add(inference_.success, d.request_ns);
  add(inference_.queue, d.queue_ns);
  add(inference_.compute_input, d.input_ns);
  add(inference_.compute_infer, d.infer_ns);
  add(inference_.compute_output, d.output_ns);
  inference_count_ += batch_size;
  execution_count_ += 1;
  last_inference_ms_ = now_ms();
  auto& b = batches_[batch_size];
  b.batch_size = batch_size;
  add(b.compute_input, d.input_ns);
  add(b.compute_infer, d.infer_ns);
  add(b.compute_output, d.output_ns);
}

void version_stats::record_failure(std::uint64_t request_ns, bool backend) {
  std::lock_guard lock(mu_);
  add(inference_.fail, request_ns);
  (backend ? fail_backend_ : fail_rejected_) += 1;
  last_inference_ms_ = now_ms();
}

v2::model_statistics version_stats::snapshot(const std::string& name, std::int64_t version) const {
  std::lock_guard lock(mu_);
  v2::model_statistics s;
  s.name = name;
  s.version = std::to_string(version);
  s.last_inference = last_inference_ms_;
  s.inference_count = inference_count_;
  s.execution_count = execution_count_;
  s.inference_stats = inference_;
  for (const auto& kv : batches_) s.batch_stats.push_back(kv.second);
  return s;
}

std::uint64_t version_stats::failures_rejected() const {
  std::lock_guard lock(mu_);
  return fail_rejected_;
}
std::uint64_t version_stats::failures_backend() const {
  std::lock_guard lock(mu_);
  return fail_backend_;
}

// --- sequences -----------------------------------------------------------------------------

sequence_state* sequence_table::begin(const std::string& id, bool start,
                                      std::chrono::microseconds max_idle, bool& found) {
  std::lock_guard lock(mu_);
  auto now = clock::now();
  // Release idle sequences (the sequence batcher's max_sequence_idle_microseconds).
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (now - it->second.last > max_idle) it = slots_.erase(it);
    else ++it;
  }
  auto it = slots_.find(id);
  found = it != slots_.end();
  if (start) {
    auto& s = slots_[id];
    s.state = {};
    s.state.started = true;
    s.last = now;
    return &s.state;
  }
  if (!found) return nullptr;
  it->second.last = now;
  return &it->second.state;
}

void sequence_table::end(const std::string& id) {
  std::lock_guard lock(mu_);
  slots_.erase(id);
}

// --- instances -----------------------------------------------------------------------------

bool instance_gate::submit(job j, const std::function<void(job)>& launch) {
  {
    std::lock_guard lock(mu_);
    if (running_ >= instances_) {
      if (max_queue_ && pending_.size() >= max_queue_) return false;
      pending_.push_back(std::move(j));
      return true;
    }
    ++running_;
  }
  launch(std::move(j));
  return true;
}

void instance_gate::release(const std::function<void(job)>& launch) {
  job next;
  {
    std::lock_guard lock(mu_);
    if (pending_.empty()) {
      --running_;
      return;
    }
    next = std::move(pending_.front());
    pending_.pop_front();
  }
  launch(std::move(next));
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

model_repository::model_repository(std::vector<fs::path> roots) : roots_(std::move(roots)) {}

namespace {
bool version_dir_name(const std::string& n, std::int64_t& v) {
  if (n.empty() || n[0] == '0') return false;
  for (char c : n)
    if (c < '0' || c > '9') return false;
  auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
  (void)p;
  return ec == std::errc{};
}
}  // namespace

void model_repository::load_model(model_entry& e) {
  auto config = std::make_shared<model_config>();
  if (auto st = load_model_config(e.dir, e.name, *config)) {
    e.error = st.message();
    return;
  }
  std::vector<std::int64_t> found;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(e.dir, ec)) {
    std::int64_t v = 0;
    if (d.is_directory(ec) && version_dir_name(d.path().filename().string(), v)) found.push_back(v);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::int64_t> chosen;
  const auto& policy = config->proto.version_policy();
  if (policy.has_all()) {
    chosen = found;
  } else if (policy.has_specific()) {
    for (auto v : policy.specific().versions())
      if (std::binary_search(found.begin(), found.end(), v)) chosen.push_back(v);
    std::sort(chosen.begin(), chosen.end());
  } else {
    std::size_t n = policy.has_latest() ? policy.latest().num_versions() : 1;
    std::size_t first = found.size() > n ? found.size() - n : 0;
    chosen.assign(found.begin() + static_cast<std::ptrdiff_t>(first), found.end());
  }
  if (chosen.empty()) {
    e.error = "failed to load '" + e.name + "', no version is available";
    return;
  }
  for (auto v : chosen) {
    auto mv = std::make_shared<model_version>();
    mv->name = e.name;
    mv->version = v;
    mv->config = config;
    std::size_t instances = 0;
    for (const auto& g : config->proto.instance_group())
      instances += static_cast<std::size_t>(std::max(1, g.count()));
    mv->instances.configure(instances, config->proto.dynamic_batching().default_queue_policy().max_queue_size());
    status st;
    mv->impl = make_backend(*config, st);
    if (st) {
      mv->state = model_state::unavailable;
      mv->reason = st.message();
    } else {
      mv->state = model_state::ready;
    }
    e.versions.push_back(std::move(mv));
  }
}

bool model_repository::load_all(const std::function<void(bool, const std::string&)>& log) {
  std::map<std::string, model_entry, std::less<>> models;
  for (const auto& root : roots_) {
    std::error_code ec;
    for (const auto& d : fs::directory_iterator(root, ec)) {
      if (!d.is_directory(ec)) continue;
      std::string name = d.path().filename().string();
      auto [it, inserted] = models.try_emplace(name);
      if (!inserted) {
        it->second.duplicate = true;
        continue;
      }
      it->second.name = name;
      it->second.dir = d.path();
    }
    if (ec) log(true, "failed to read model repository '" + root.string() + "': " + ec.message());
  }
  bool ok = true;
  for (auto& [name, e] : models) {
    if (e.duplicate) {
      e.error = "model appears in two or more repositories";
      log(true, "failed to load '" + name + "': " + e.error);
      ok = false;
      continue;
    }
    load_model(e);
    if (!e.error.empty()) {
      log(true, "failed to load '" + name + "': " + e.error);
      ok = false;
    }
    for (const auto& v : e.versions) {
      if (v->state == model_state::ready) {
        log(false, "successfully loaded '" + name + "' version " + std::to_string(v->version));
      } else {
        log(true, "failed to load '" + name + "' version " + std::to_string(v->version) + ": " +
                      v->reason);
        ok = false;
      }
    }
  }
  std::unique_lock lock(mu_);
  models_ = std::move(models);
  return ok;
}

std::shared_ptr<model_version> model_repository::find(std::string_view name,
                                                      std::string_view version_text,
                                                      status& st) const {
  std::int64_t version = -1;
  if ((st = parse_version(version_text, version))) return nullptr;
  std::shared_lock lock(mu_);
  auto prefix = [&] { return "Request for unknown model: '" + std::string(name) + "'"; };
  auto it = models_.find(name);
  if (it == models_.end() || it->second.versions.empty()) {
    st = {errc::not_found, prefix() + " is not found"};
    return nullptr;
  }
  const auto& versions = it->second.versions;
  if (version == -1) {
    for (auto v = versions.rbegin(); v != versions.rend(); ++v)
      if ((*v)->state == model_state::ready) return *v;
    st = {errc::not_found, prefix() + " has no available versions"};
    return nullptr;
  }
  for (const auto& v : versions) {
    if (v->version != version) continue;
    if (v->state == model_state::ready) return v;
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
      if (v->state == model_state::ready) out.push_back(v);
  return out;
}

std::vector<std::shared_ptr<model_version>> model_repository::stats_versions(
    std::string_view name, std::string_view version_text, status& st) const {
  std::int64_t version = -1;
  if ((st = parse_version(version_text, version))) return {};
  std::shared_lock lock(mu_);
  std::vector<std::shared_ptr<model_version>> out;
  auto it = models_.find(name);
  if (it != models_.end())
    for (const auto& v : it->second.versions)
      if (v->state == model_state::ready && (version == -1 || v->version == version))
        out.push_back(v);
  if (out.empty()) {
    bool any_ready = false;
    if (it != models_.end())
      for (const auto& v : it->second.versions) any_ready |= v->state == model_state::ready;
    if (version == -1 || !any_ready)
      st = {errc::invalid_arg, "requested model '" + std::string(name) + "' is not available"};
    else
      st = {errc::invalid_arg,
            "requested model version is not available for model '" + std::string(name) + "'"};
  }
  return out;
}

bool model_repository::all_ready() const {
  std::shared_lock lock(mu_);
  for (const auto& [name, e] : models_) {
    if (e.versions.empty()) return false;
    for (const auto& v : e.versions)
      if (v->state != model_state::ready &&
          !(v->state == model_state::unavailable && v->reason == "unloaded"))
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
    if (v->state == model_state::ready) out.push_back(v->version);
  return out;
}

}  // namespace inferwire::server
