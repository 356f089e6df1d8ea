// SPDX-License-Identifier: Apache-2.0
// Ensembles (platform "ensemble"): the steps of ensemble_scheduling run over the repository's
// models, in dataflow order, passing tensors by name through input_map/output_map.
#include "inference.hpp"
#include "trace.hpp"

#include <deque>
#include <map>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace inferwire::server {

namespace {

class ensemble_backend final : public backend {
 public:
  ensemble_backend(const model_repository& repo, std::vector<int> order) : repo_(repo), order_(std::move(order)) {}

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

  status execute(execution& e) override {
    // A step runs on the thread of the ensemble that calls it, and in explicit model control
    // clients load ensembles: a chain of 20,000 that each call the next ended the server when a
    // request reached its bottom (and a reload can close a cycle no load saw).
    static thread_local int depth = 0;
    if (depth >= max_ensemble_depth)
      return {errc::internal, "ensemble '" + e.config.name + "' is nested deeper than " +
                                     std::to_string(max_ensemble_depth) + " ensembles"};
    ++depth;
    struct leave {
      ~leave() { --depth; }
    } on_return;
    return run(e);
  }

 private:
  status run(execution& e) const {
    const auto& steps = e.config.proto.ensemble_scheduling().step();
    // Tensors by ensemble name; data are views into the request or into earlier steps'
    // responses, which live in `responses` until the end of this call.
    std::map<std::string, v2::infer_input, std::less<>> tensors;
    for (const auto& in : e.inputs) {
      v2::infer_input t;
      t.name = in.name;
      t.datatype = in.datatype;
      t.shape = in.shape;
      t.data = v2::tensor_data::view(in.data.bytes());
      tensors.emplace(in.name, std::move(t));
    }
    std::deque<v2::infer_request> requests;
    std::deque<v2::infer_response> responses;
    for (const int i : order_)
      if (auto st = run_step(e.config.name, steps[i], tensors, requests, responses, e.trace)) return st;
    for (const auto& out : e.config.outputs) {
      auto it = tensors.find(out.name);
      if (it == tensors.end())
        return {errc::internal, "ensemble '" + e.config.name + "' produced no output '" + out.name + "'"};
      v2::infer_output o;
      o.name = out.name;
      o.datatype = it->second.datatype;
      o.shape = it->second.shape;
      o.data = v2::tensor_data::own(std::string(it->second.data.str()));  // outlives the steps
      e.outputs.push_back(std::move(o));
    }
    return {};
  }

  status run_step(const std::string& ensemble, const inference::ModelEnsembling::Step& step,
                  std::map<std::string, v2::infer_input, std::less<>>& tensors,
                  std::deque<v2::infer_request>& requests,
                  std::deque<v2::infer_response>& responses, trace_record* parent) const {
    status st;
    const std::string version =
        step.model_version() > 0 ? std::to_string(step.model_version()) : std::string();
    auto model = repo_.find(step.model_name(), version, st);
    if (!model) return st;
    auto& req = requests.emplace_back();
    for (const auto& [model_input, tensor] : step.input_map()) {
      // Absent when the request left out an optional input, or a step left out an output.
      const auto found = tensors.find(tensor);
      if (found == tensors.end())
        return {errc::invalid_arg, "ensemble '" + ensemble + "' step '" + step.model_name() + "' needs tensor '" +
                                       tensor + "', which the request or an earlier step did not provide"};
      const auto& src = found->second;
      v2::infer_input in;
      in.name = model_input;
      in.datatype = src.datatype;
      in.shape = src.shape;
      in.data = v2::tensor_data::view(src.data.bytes());
      req.inputs.push_back(std::move(in));
    }
    for (const auto& [model_output, tensor] : step.output_map()) {
      v2::requested_output o;
      o.name = model_output;
      o.binary_data = true;
      req.outputs.push_back(std::move(o));
    }
    std::int64_t batch = 1;
    if (auto vs = validate_request(*model->config, req, batch)) return vs;
    request_clock times;
    times.received = times.queued = clock::now();
    auto& res = responses.emplace_back();
    // A traced ensemble request traces each step as its child (parent_id).
    std::shared_ptr<trace_record> child;
    if (parent && parent->registry) child = parent->registry->child(*parent, model->name, model->version);
    const status xs = execute_request(*model, req, batch, times, res, nullptr, nullptr, child.get());
    if (child) {
      stamp_core(*child, times);
      child->registry->finish(*child);
    }
    if (xs) return xs;
    for (const auto& [model_output, tensor] : step.output_map()) {
      const v2::infer_output* o = res.output(model_output);
      if (!o) continue;
      v2::infer_input t;
      t.name = tensor;
      t.datatype = o->datatype;
      t.shape = o->shape;
      t.data = v2::tensor_data::view(o->data.bytes());
      tensors.insert_or_assign(tensor, std::move(t));
    }
    return {};
  }

  const model_repository& repo_;
  const std::vector<int> order_;  ///< the steps, in the order they run
};

}  // namespace

std::unique_ptr<backend> make_ensemble_backend(const model_repository& repo, const model_config& c, status& st) {
  std::vector<int> order;
  if ((st = ensemble_backend::order_steps(c, order))) return nullptr;
  return std::make_unique<ensemble_backend>(repo, std::move(order));
}

}  // namespace inferwire::server
