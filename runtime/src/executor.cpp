#include "tessera/runtime/executor.h"

#include <chrono>
#include <utility>

#include <fmt/format.h>

#include "host_ops.h"
#include "tessera/core/error.h"
#include "tessera/kernels/builders/builder_support.h"

namespace tessera::runtime {

using compiler::Node;
using compiler::Plan;
using compiler::Step;
using compiler::StepKind;
using compiler::ValueKind;
using compiler::ValueRef;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The name a ref's whole value is stored under ("final_norm[-1]" reads "final_norm").
std::string whole_name(const ValueRef& r) {
  ValueRef whole = r;
  whole.last_row = false;
  return whole.str();
}

// Activation values by name, and for each the index of the last step that reads it.
class ValueStore {
 public:
  ValueStore(const Plan& plan, const Values& inputs, const std::set<std::string>* keep,
             int64_t last_row)
      : plan_(plan), inputs_(inputs), keep_(keep), last_row_(last_row) {
    for (size_t i = 0; i < plan.steps.size(); ++i)
      for (const ValueRef& r : plan.graph.nodes[plan.steps[i].node].inputs)
        if (r.kind == ValueKind::activation) last_reader_[whole_name(r)] = i;
  }

  // The values of a non-weight ref: the whole value, or its selected row.
  std::span<const float> get(const ValueRef& r, const Step& step) const {
    const std::string name = whole_name(r);
    const std::vector<float>* v = nullptr;
    if (r.kind == ValueKind::host) {
      auto it = inputs_.find(name);
      if (it == inputs_.end())
        throw_error<InputError>("executor: {} S={} P={}: step {} needs host input '{}', which "
                                "the caller did not supply", plan_.model, plan_.seq, plan_.past,
                                step.name, name);
      v = &it->second;
    } else {
      auto it = values_.find(name);
      TESSERA_CHECK(it != values_.end(), "executor: step {} reads '{}', which no earlier step "
                    "produced (or it was dropped too early)", step.name, name);
      v = &it->second;
    }
    if (!r.last_row) return *v;
    return row_of(r, *v);
  }

  void put(const std::string& name, size_t step, std::vector<float> v) {
    auto it = last_reader_.find(name);
    if ((it != last_reader_.end() && it->second > step) || kept(name)) values_[name] = std::move(v);
  }

  // Drops the inputs of `step` that no later step reads.
  void release(const Node& node, size_t step) {
    for (const ValueRef& r : node.inputs) {
      if (r.kind != ValueKind::activation) continue;
      const std::string name = whole_name(r);
      if (last_reader_.at(name) == step && !kept(name)) values_.erase(name);
    }
  }

  Values take() { return std::move(values_); }

 private:
  bool kept(const std::string& name) const { return keep_ == nullptr || keep_->count(name) > 0; }

  std::span<const float> row_of(const ValueRef& r, const std::vector<float>& v) const {
    const int64_t rows = plan_.graph.seq;
    TESSERA_CHECK(rows > 0 && static_cast<int64_t>(v.size()) % rows == 0,
                  "executor: {} has {} values, not {} rows", r.str(), v.size(), rows);
    const int64_t row = last_row_ < 0 ? rows - 1 : last_row_;
    if (row >= rows)
      throw_error<UsageError>("executor: {} takes row {} of a value with {} rows", r.str(), row,
                              rows);
    const size_t width = v.size() / static_cast<size_t>(rows);
    return std::span<const float>(v).subspan(static_cast<size_t>(row) * width, width);
  }

  const Plan& plan_;
  const Values& inputs_;
  const std::set<std::string>* keep_;
  int64_t last_row_;
  std::map<std::string, size_t> last_reader_;
  Values values_;
};

// The packed weight buffers of one step, swapped into the step's host memory
// (no copy of the weights) and swapped back when the step ends, exceptions
// included. Must be destroyed before the host memory it points into.
class WeightSwap {
 public:
  explicit WeightSwap(npu::HostMemory& host) : host_(host) {}
  WeightSwap(const WeightSwap&) = delete;
  WeightSwap& operator=(const WeightSwap&) = delete;
  ~WeightSwap() {
    for (auto& [bytes, name] : swapped_) std::swap(*bytes, host_[name]);
  }

  void swap_in(compiler::PackedWeights::Buffers& buffers, const std::string& key) {
    for (auto& [name, bytes] : buffers) {
      TESSERA_CHECK(host_.count(name) == 0, "executor: host buffer '{}' of weight layout {} is "
                    "already taken by another input of the step", name, key);
      std::swap(host_[name], bytes);
      swapped_.emplace_back(&bytes, name);
    }
  }

 private:
  npu::HostMemory& host_;
  std::vector<std::pair<std::vector<std::byte>*, std::string>> swapped_;
};

compiler::PackedWeights::Buffers& weight_buffers(compiler::PackedWeights& w, const Step& step,
                                                 size_t input) {
  const std::string key =
      input < step.weight_layouts.size() ? step.weight_layouts[input] : std::string();
  if (key.empty())
    throw_error<InternalError>("executor: step {} has no weight layout key for its input {}",
                               step.name, input);
  if (!w.contains(key))
    throw_error<InternalError>("executor: step {} needs weight layout '{}', which the packed "
                               "weights (model '{}', {} layouts) do not hold", step.name, key,
                               w.model, w.keys().size());
  return w.get_mut(key);
}

std::vector<float> run_npu_step(const Step& step, const Node& node, const ValueStore& values,
                                compiler::PackedWeights& weights, const npu::Simulator& sim) {
  TESSERA_CHECK(step.op != nullptr, "executor: NPU step {} has no built op", step.name);
  const kernels::BuiltOp& op = *step.op;
  TESSERA_CHECK(op.inputs.size() == node.inputs.size() && op.outputs.size() == 1,
                "executor: step {} ({}) has {} inputs / {} outputs, its node {} inputs", step.name,
                op.shape.key(), op.inputs.size(), op.outputs.size(), node.inputs.size());
  npu::HostMemory host;
  WeightSwap swap(host);  // declared after `host`: swaps back before host dies
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (node.inputs[i].kind == ValueKind::weight)
      swap.swap_in(weight_buffers(weights, step, i), step.weight_layouts[i]);
  for (const npu::HostBuffer& h : op.design.host_buffers) {
    auto [it, fresh] = host.try_emplace(h.name);
    // Zero-filled first, as run_op does: padding no pack() writes must read 0.
    if (fresh) it->second.assign(static_cast<size_t>(h.bytes), std::byte{0});
    else if (it->second.size() != static_cast<size_t>(h.bytes))
      throw_error<InternalError>("executor: step {}: packed weight buffer '{}' has {} bytes, "
                                 "the design declares {}", step.name, h.name, it->second.size(),
                                 h.bytes);
  }
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const ValueRef& r = node.inputs[i];
    if (r.kind == ValueKind::weight) continue;
    std::span<const float> v = values.get(r, step);
    const int64_t want = shape_numel(op.inputs[i].shape);
    if (static_cast<int64_t>(v.size()) != want) {
      const std::string msg = fmt::format("executor: step {} input {} has {} values, {} needs {}",
                                          step.name, r.str(), v.size(), op.shape.key(), want);
      if (r.kind == ValueKind::host) throw InputError(msg);
      throw InternalError(msg);
    }
    op.pack(i, v, host);
  }
  if (op.patch) sim.run(op.patch(op.design, host), host);
  else sim.run(op.design, host);
  return op.unpack(0, host);
}

std::vector<float> run_host_step(const Step& step, const Node& node, const ValueStore& values,
                                 compiler::PackedWeights& weights) {
  const std::string& op = step.shape.op;
  if (op == "embedding") {
    const auto& buffers = weight_buffers(weights, step, 1);
    auto table = buffers.find("table");
    if (table == buffers.end())
      throw_error<InternalError>("executor: step {}: weight layout '{}' has no 'table' buffer",
                                 step.name, step.weight_layouts[1]);
    return host_embedding(step.shape, values.get(node.inputs[0], step), table->second);
  }
  if (op == "kv_append")
    return host_kv_append(step.shape, values.get(node.inputs[0], step),
                          values.get(node.inputs[1], step));
  if (op == "argmax") return host_argmax(step.shape, values.get(node.inputs[0], step));
  throw_error<InternalError>("executor: step {}: op '{}' has no host implementation (host steps: "
                             "embedding, kv_append, argmax)", step.name, op);
}

}  // namespace

Executor::Executor(const npu::DeviceSpec& spec, compiler::PackedWeights& weights)
    : spec_(spec), weights_(&weights) {}

ExecResult Executor::run(const Plan& plan, const Values& inputs, const std::set<std::string>* keep,
                         const std::function<void(size_t, size_t)>& progress, int64_t last_row) {
  kernels::ensure_tile_kernels_registered();
  const npu::Simulator sim(spec_);
  ValueStore values(plan, inputs, keep, last_row);
  ExecResult result;
  const auto t_run = Clock::now();
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& step = plan.steps[i];
    TESSERA_CHECK(step.node < plan.graph.nodes.size(), "executor: step {} names node {} of {}",
                  step.name, step.node, plan.graph.nodes.size());
    const Node& node = plan.graph.nodes[step.node];
    const auto t0 = Clock::now();
    std::vector<float> out = step.kind == StepKind::npu
                                 ? run_npu_step(step, node, values, *weights_, sim)
                                 : run_host_step(step, node, values, *weights_);
    values.put(node.output.str(), i, std::move(out));
    values.release(node, i);
    StepRecord rec{step.name, step.shape.op, step.kind == StepKind::npu, step.seconds(),
                   seconds_since(t0)};
    result.predicted_seconds += rec.predicted_seconds;
    result.steps.push_back(std::move(rec));
    if (progress) progress(i + 1, plan.steps.size());
  }
  result.host_seconds = seconds_since(t_run);
  result.values = values.take();
  return result;
}

}  // namespace tessera::runtime
