// SPDX-License-Identifier: Apache-2.0
// Ensembles (platform "ensemble"): the steps of ensemble_scheduling run over the repository's
// models, in dataflow order, passing tensors by name through input_map/output_map. Each step is
// a request of its own to its model's scheduler, as in Triton.
#include "gpu.hpp"
#include "inference.hpp"
#include "trace.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace inferwire::server {

namespace {

struct ensemble_run;

class ensemble_backend final : public backend {
 public:
  ensemble_backend(const model_repository& repo, const model_config& c, std::vector<int> order)
      : repo_(repo), order_(std::move(order)) {
    // Which steps read each tensor, and how many distinct tensors each step reads: a request's
    // run follows its tensors through these in time linear in the steps and their maps.
    const auto& steps = c.proto.ensemble_scheduling().step();
    reads_.resize(static_cast<std::size_t>(steps.size()));
    for (int i = 0; i < steps.size(); ++i) {
      std::set<std::string_view> distinct;
      for (const auto& kv : steps[i].input_map())
        if (distinct.insert(kv.second).second) readers_[kv.second].push_back(i);
      reads_[static_cast<std::size_t>(i)] = distinct.size();
    }
  }

  /// The order the steps of `c` run in, found once at load: a step runs once every tensor it
  /// reads is an ensemble input or the output of a step before it, steps that are ready at the
  /// same time in the order of the config. Linear in the steps and their maps (finding it per
  /// request, pass by pass, was quadratic: 10,000 steps in reverse order made each request
  /// cost 10^8 lookups). An error names a step that can never run.
  static status order_steps(const model_config& c, std::vector<int>& order) {
    const auto& steps = c.proto.ensemble_scheduling().step();
    std::unordered_map<std::string_view, std::vector<int>> readers;
    std::vector<std::size_t> missing(static_cast<std::size_t>(steps.size()));
    for (int i = 0; i < steps.size(); ++i) {
      std::unordered_set<std::string_view> reads;
      for (const auto& kv : steps[i].input_map())
        if (reads.insert(kv.second).second) readers[kv.second].push_back(i);
      missing[static_cast<std::size_t>(i)] = reads.size();
    }
    std::deque<int> ready;
    for (int i = 0; i < steps.size(); ++i)
      if (missing[static_cast<std::size_t>(i)] == 0) ready.push_back(i);
    std::unordered_set<std::string_view> available;
    auto provide = [&](std::string_view tensor) {
      if (!available.insert(tensor).second) return;
      if (auto it = readers.find(tensor); it != readers.end())
        for (int i : it->second)
          if (--missing[static_cast<std::size_t>(i)] == 0) ready.push_back(i);
    };
    for (const auto& in : c.inputs) provide(in.name);
    order.clear();
    order.reserve(static_cast<std::size_t>(steps.size()));
    while (!ready.empty()) {
      const int i = ready.front();
      ready.pop_front();
      order.push_back(i);
      for (const auto& kv : steps[i].output_map()) provide(kv.second);
    }
    if (order.size() == static_cast<std::size_t>(steps.size())) return {};
    for (int i = 0; i < steps.size(); ++i) {
      if (missing[static_cast<std::size_t>(i)] == 0) continue;
      for (const auto& kv : steps[i].input_map())
        if (!available.count(kv.second))
          return {errc::invalid_arg, "ensemble '" + c.name + "' cannot run: step " + std::to_string(i) + " ('" +
                                         steps[i].model_name() + "') reads tensor '" + kv.second +
                                         "', which no ensemble input or earlier step provides"};
    }
    return {errc::invalid_arg, "ensemble '" + c.name + "' cannot run"};  // not reached
  }

  bool schedules_itself() const noexcept override { return true; }

  /// Runs the steps of `call`: each as a call of its own to its model's scheduler (its queue,
  /// batching, limits and pending count), as soon as every tensor it reads is there. Once the
  /// last step finished, the ensemble's own run (execute) builds the response from the tensors.
  void start(const call_ptr& call) const override;

  // The ensemble's own run, after its steps: the outputs from the finished steps' tensors.
  status execute(execution& e) override;

 private:
  friend struct ensemble_run;
  /// Hands `run` to the ensemble's own run of `request` (null: takes it back).
  void finished(const v2::infer_request* request, std::shared_ptr<ensemble_run> run) const {
    std::lock_guard lock(mu_);
    if (run) finished_[request] = std::move(run);
    else finished_.erase(request);
  }

  const model_repository& repo_;
  const std::vector<int> order_;  ///< the steps, in the order they run
  std::unordered_map<std::string, std::vector<int>> readers_;  ///< tensor -> the steps that read it
  std::vector<std::size_t> reads_;  ///< per step: the distinct tensors it reads
  /// Runs whose steps are done, by their request, until their ensemble's own run takes them.
  mutable std::mutex mu_;
  mutable std::unordered_map<const v2::infer_request*, std::shared_ptr<ensemble_run>> finished_;
};

// --- one request's way through the steps ---------------------------------------------------

/// The steps of one ensemble request. Tensors are views of the request's inputs or of finished
/// steps' responses, which the run keeps (it is the ensemble response's batch_data).
struct ensemble_run : std::enable_shared_from_this<ensemble_run> {
  const ensemble_backend* owner = nullptr;
  const model_repository* repo = nullptr;
  call_ptr call;
  const google::protobuf::RepeatedPtrField<inference::ModelEnsembling::Step>* steps = nullptr;

  std::mutex mu;
  std::map<std::string, v2::infer_input, std::less<>> tensors;
  std::vector<std::size_t> missing;  ///< per step: tensors it reads that are not there yet
  std::vector<bool> started;
  std::deque<int> ready;
  std::size_t left = 0;       ///< steps not finished
  std::size_t in_flight = 0;  ///< steps submitted and not finished
  bool pumping = false, done = false;
  status error;
  std::vector<std::shared_ptr<const void>> kept;  ///< what tensors of batched steps view
  std::deque<std::string> staged;           ///< device inputs copied to the host
  std::deque<std::shared_ptr<trace_record>> traces;

  const std::string& name() const { return call->model->config->name; }

  // A tensor is there (under mu): the steps that read it may become ready.
  void provide(const std::string& tensor, v2::infer_input t) {
    const bool fresh = tensors.insert_or_assign(tensor, std::move(t)).second;
    if (!fresh) return;
    if (auto it = owner->readers_.find(tensor); it != owner->readers_.end())
      for (int i : it->second)
        if (!started[static_cast<std::size_t>(i)] && missing[static_cast<std::size_t>(i)] > 0 &&
            --missing[static_cast<std::size_t>(i)] == 0)
          ready.push_back(i);
  }

  // Submits the ready steps, one at a time; a step that finishes meanwhile (inline) adds to
  // `ready` and leaves the submitting to this loop, so a long chain does not recurse.
  void pump() {
    std::unique_lock lock(mu);
    if (pumping) return;
    pumping = true;
    while (!ready.empty() && !error) {
      const int i = ready.front();
      ready.pop_front();
      started[static_cast<std::size_t>(i)] = true;
      ++in_flight;
      lock.unlock();
      submit(i);
      lock.lock();
    }
    pumping = false;
    if (done || in_flight != 0 || !ready.empty()) return;
    if (!error && left != 0) error = stuck();
    done = true;
    lock.unlock();
    complete();
  }

  // The first step that cannot run: a tensor it reads never came.
  status stuck() const {
    for (int i = 0; i < steps->size(); ++i) {
      if (started[static_cast<std::size_t>(i)]) continue;
      for (const auto& kv : (*steps)[i].input_map())
        if (!tensors.count(kv.second))
          return {errc::invalid_arg, "ensemble '" + name() + "' step '" + (*steps)[i].model_name() + "' needs tensor '" +
                                         kv.second + "', which the request or an earlier step did not provide"};
    }
    return {errc::internal, "ensemble '" + name() + "' stopped before its last step"};
  }

  void submit(int i) {
    const auto& step = (*steps)[i];
    status st;
    const std::string version = step.model_version() > 0 ? std::to_string(step.model_version()) : std::string();
    auto model = repo->find(step.model_name(), version, st);
    if (!model) return step_done(i, nullptr, st);
    auto sc = make_call();
    sc->model = model;
    sc->ensemble_depth = call->ensemble_depth + 1;
    {
      std::lock_guard lock(mu);
      for (const auto& [model_input, tensor] : step.input_map()) {
        const auto& src = tensors.at(tensor);
        v2::infer_input in;
        in.name = model_input;
        in.datatype = src.datatype;
        in.shape = src.shape;
        in.data = v2::tensor_data::view(src.data.bytes());
        sc->request.inputs.push_back(std::move(in));
      }
    }
    for (const auto& [model_output, tensor] : step.output_map()) {
      v2::requested_output o;
      o.name = model_output;
      o.binary_data = true;
      sc->request.outputs.push_back(std::move(o));
    }
    // A step belongs to the ensemble request's sequence and keeps its priority and timeout.
    for (const char* key : {"sequence_id", "sequence_start", "sequence_end", "priority", "timeout"})
      if (const auto* v = call->request.parameters.find(key)) sc->request.parameters.set(key, *v);
    sc->request.id = call->request.id;
    if (auto vs = validate_request(*model->config, sc->request, sc->batch_size)) {
      model->stats.record_failure(0, failure_reason::other);
      return step_done(i, nullptr, vs);
    }
    sc->times.received = sc->times.queued = clock::now();
    // A traced ensemble request traces each step as its child (parent_id).
    std::shared_ptr<trace_record> child;
    if (call->trace && call->trace->registry) child = call->trace->registry->child(*call->trace, model->name, model->version);
    sc->trace = child;
    sc->hooks.cancelled = call->hooks.cancelled;
    // The step's call lives while its scheduler holds it; its outputs move into `tensors`
    // when it is done, so a long ensemble keeps its tensors, not its steps' calls.
    infer_call* raw = sc.get();
    sc->done = [self = shared_from_this(), i, raw](status result) { self->step_done(i, raw, std::move(result)); };
    if (!model->instances.schedule(sc)) {
      model->stats.record_failure(0, failure_reason::rejected);
      sc->done = nullptr;
      step_done(i, raw, {errc::unavailable, "Exceeds maximum queue size"});
    }
  }

  void step_done(int i, infer_call* sc, status result) {
    if (sc && sc->trace) {
      stamp_core(*sc->trace, sc->times);
      sc->trace->registry->finish(*sc->trace);
    }
    {
      std::lock_guard lock(mu);
      --in_flight;
      if (result) {
        if (!error) error = std::move(result);
      } else {
        --left;
        if (sc->batch_data) kept.push_back(sc->batch_data);  // batched outputs view it
        for (const auto& map : (*steps)[i].output_map()) {
          const std::string& model_output = map.first;
          const std::string& tensor = map.second;
          auto o = std::find_if(sc->response.outputs.begin(), sc->response.outputs.end(),
                                [&model_output](const v2::infer_output& x) { return x.name == model_output; });
          if (o == sc->response.outputs.end()) continue;  // a step may leave out an output; whoever reads it fails
          v2::infer_input t;
          t.name = tensor;
          t.datatype = o->datatype;
          t.shape = std::move(o->shape);
          t.data = std::move(o->data);
          provide(tensor, std::move(t));
        }
      }
    }
    pump();
  }

  // Every step ran (or one failed): the ensemble's own run builds the response.
  // The run lets go of the call here: the call keeps the run (its batch_data), not both ways.
  void complete() {
    const call_ptr c = std::move(call);
    if (error) {
      c->model->stats.record_failure(
          static_cast<std::uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - c->times.received).count()),
          reason_of(error, false));
      return c->finish(std::move(error));
    }
    c->batch_data = shared_from_this();  // the response's outputs view the steps' responses
    owner->finished(&c->request, shared_from_this());
    inference_runner().run_one(*c);
    owner->finished(&c->request, nullptr);  // in case the run failed before it took the steps' tensors
  }

  status outputs(execution& e) {
    std::lock_guard lock(mu);
    for (const auto& out : e.config.outputs) {
      auto it = tensors.find(out.name);
      if (it == tensors.end())
        return {errc::internal, "ensemble '" + e.config.name + "' produced no output '" + out.name + "'"};
      v2::infer_output o;
      o.name = out.name;
      o.datatype = it->second.datatype;
      o.shape = it->second.shape;
      o.data = v2::tensor_data::view(it->second.data.bytes());
      e.outputs.push_back(std::move(o));
    }
    return {};
  }
};

status ensemble_backend::execute(execution& e) {
  std::shared_ptr<ensemble_run> run;
  {
    std::lock_guard lock(mu_);
    if (auto it = finished_.find(e.request); it != finished_.end()) {
      run = std::move(it->second);
      finished_.erase(it);
    }
  }
  if (!run) return {errc::internal, "ensemble '" + e.config.name + "' ran without its steps"};
  return run->outputs(e);
}

void ensemble_backend::start(const call_ptr& call) const {
  const model_config& c = *call->model->config;
  // Ensembles nest (a step may be an ensemble), and in explicit model control clients load
  // them: a chain of 20,000 that each call the next ended the server when a request reached
  // its bottom, and a reload can close a cycle no load saw.
  if (call->ensemble_depth >= max_ensemble_depth) {
    call->model->stats.record_failure(0, failure_reason::other);
    return call->finish({errc::internal, "ensemble '" + c.name + "' is nested deeper than " +
                                             std::to_string(max_ensemble_depth) + " ensembles"});
  }
  auto run = std::make_shared<ensemble_run>();
  run->owner = this;
  run->repo = &repo_;
  run->call = call;
  run->steps = &c.proto.ensemble_scheduling().step();
  const auto n = static_cast<std::size_t>(run->steps->size());
  run->left = n;
  run->started.assign(n, false);
  run->missing = reads_;
  for (const int i : order_)
    if (run->missing[static_cast<std::size_t>(i)] == 0) run->ready.push_back(i);
  {
    std::lock_guard lock(run->mu);
    const auto& r = call->request;
    for (std::size_t k = 0; k < r.inputs.size(); ++k) {
      const auto& in = r.inputs[k];
      v2::infer_input t;
      t.name = in.name;
      t.datatype = in.datatype;
      t.shape = in.shape;
      const placement* device = k < call->places.inputs.size() && call->places.inputs[k].data ? &call->places.inputs[k] : nullptr;
      if (device) {
        // Steps read host tensors: a CUDA shared-memory input is copied once.
        std::string& host = run->staged.emplace_back(device->size, '\0');
        if (auto st = gpu_copy({reinterpret_cast<std::byte*>(host.data()), device->size, -1}, *device, device->size))
          return call->finish(std::move(st));
        t.data = v2::tensor_data::view(std::string_view(host));
      } else {
        t.data = v2::tensor_data::view(in.data.bytes());
      }
      run->provide(in.name, std::move(t));
    }
  }
  run->pump();
}

}  // namespace

std::unique_ptr<backend> make_ensemble_backend(const model_repository& repo, const model_config& c, status& st) {
  std::vector<int> order;
  if ((st = ensemble_backend::order_steps(c, order))) return nullptr;
  return std::make_unique<ensemble_backend>(repo, c, std::move(order));
}

}  // namespace inferwire::server
