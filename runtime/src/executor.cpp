#include "tessera/core/mutants.h"
#include "tessera/runtime/executor.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "host_ops.h"
#include "tessera/compiler/passes.h"
#include "tessera/core/error.h"
#include "tessera/kernels/builders/builder_support.h"

namespace tessera::runtime {

using compiler::Launch;
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
  std::string s = r.str();
  if (r.last_row) s.resize(s.size() - 4);  // "[-1]"
  return s;
}

// A value kept as the bytes its producer's design wrote (its output buffers
// in name order), for readers that read that layout as it is.
struct PackedValue {
  std::string layout;
  std::vector<std::vector<std::byte>> buffers;
};

// Activation values by name (FP32 of bf16 values, and packed bytes where a
// reader takes them as they are), and for each the index of the last step
// that reads it.
class ValueStore {
 public:
  ValueStore(const Plan& plan, const Values& inputs, const std::set<std::string>* keep,
             const std::map<std::string, KeepRows>* keep_rows, int64_t last_row,
             std::map<std::string, Executor::ResidentImage>& resident)
      : plan_(plan), inputs_(inputs), keep_(keep), keep_rows_(keep_rows), last_row_(last_row), resident_(resident) {
    for (size_t i = 0; i < plan.steps.size(); ++i)
      for (const Launch& l : plan.steps[i].launches) {
        const Node& n = plan.graph.nodes.at(l.node);
        for (size_t k = 0; k < n.inputs.size(); ++k) {
          const ValueRef& r = n.inputs[k];
          if (r.kind != ValueKind::activation) continue;
          Readers& rd = readers_[whole_name(r)];
          rd.last = i;
          const bool host = plan.steps[i].kind == StepKind::host;
          rd.layouts.push_back(host || r.last_row ? &kValues : &l.in_layouts.at(k));
        }
      }
  }

  // Does some reader want `name` as FP32 values / as the bytes of `layout`?
  bool wants_values(const std::string& name, const std::string& layout) const {
    return kept(name) || kept_rows(name) != nullptr || read_as_values(name, layout);
  }
  // Does a later step read `name` as values (a value nobody reads counts)?
  bool read_as_values(const std::string& name, const std::string& layout) const {
    auto it = readers_.find(name);
    if (it == readers_.end()) return true;
    for (const std::string* in : it->second.layouts)
      if (!compiler::layouts_match(layout, *in)) return true;
    return false;
  }
  bool kept(const std::string& name) const { return keep_ == nullptr || keep_->count(name) > 0; }
  const KeepRows* kept_rows(const std::string& name) const {
    if (keep_rows_ == nullptr) return nullptr;
    auto it = keep_rows_->find(name);
    return it == keep_rows_->end() ? nullptr : &it->second;
  }
  // The kept rows of `name`, unpacked alone by its producer.
  void put_rows(const std::string& name, std::vector<float> rows) { rows_[name] = std::move(rows); }
  bool wants_packed(const std::string& name, const std::string& layout) const {
    auto it = readers_.find(name);
    if (it == readers_.end()) return false;
    for (const std::string* in : it->second.layouts)
      if (compiler::layouts_match(layout, *in)) return true;
    return false;
  }

  // The values of a non-weight ref: the whole value, or its selected row.
  std::span<const float> get(const ValueRef& r, const std::string& step) const {
    const std::string name = whole_name(r);
    const std::vector<float>* v = nullptr;
    if (r.kind == ValueKind::host) {
      auto it = inputs_.find(name);
      if (it == inputs_.end())
        throw_error<InputError>("executor: {} S={} P={}: step {} needs host input '{}', which "
                                "the caller did not supply", plan_.model, plan_.seq, plan_.past,
                                step, name);
      v = &it->second;
    } else {
      auto it = values_.find(name);
      TESSERA_CHECK(it != values_.end(), "executor: step {} reads '{}', which no earlier step "
                    "produced (or it was dropped too early)", step, name);
      v = &it->second;
    }
    if (!r.last_row) return *v;
    return row_of(r, *v);
  }

  // The producer's bytes of `r` when they are in `layout`, else nullptr.
  const PackedValue* packed(const ValueRef& r, const std::string& layout) const {
    if (r.kind != ValueKind::activation || r.last_row) return nullptr;
    auto it = packed_.find(r.str());
    if (it == packed_.end() || !compiler::layouts_match(it->second.layout, layout)) return nullptr;
    return &it->second;
  }

  void put(const std::string& name, size_t step, std::vector<float> v) {
    if (const KeepRows* r = kept_rows(name)) {
      const auto begin = static_cast<size_t>(r->first * r->width), end = static_cast<size_t>((r->first + r->count) * r->width);
      if (r->first < 0 || r->count < 0 || r->width <= 0 || end > v.size() || v.size() % static_cast<size_t>(r->width))
        throw_error<InternalError>("executor: keeping rows [{}, {}) of {} ({} wide) from {} values", r->first,
                                   r->first + r->count, name, r->width, v.size());
      rows_[name].assign(v.begin() + static_cast<std::ptrdiff_t>(begin), v.begin() + static_cast<std::ptrdiff_t>(end));
    }
    auto it = readers_.find(name);
    if ((it != readers_.end() && it->second.last >= step) || kept(name)) values_[name] = std::move(v);
  }
  void put_packed(const std::string& name, PackedValue v) { packed_[name] = std::move(v); }

  // Drops the inputs of the launches of step `step` that no later step reads.
  void release(const Plan& plan, const Step& s, size_t step) {
    for (const Launch& l : s.launches)
      for (const ValueRef& r : plan.graph.nodes.at(l.node).inputs) {
        if (r.kind != ValueKind::activation) continue;
        const std::string name = whole_name(r);
        if (readers_.at(name).last != step) continue;
        reclaim(name);
        packed_.erase(name);
        if (!kept(name)) values_.erase(name);
      }
  }

  Values take() {
    for (auto& [name, rows] : rows_) values_[name] = std::move(rows);
    return std::move(values_);
  }

 private:
  // A resident cache's bytes go back to the executor once no reader needs
  // them (readers view them or copy them, never write them: viewable).
  void reclaim(const std::string& name) {
    auto img = resident_.find(name);
    auto pv = packed_.find(name);
    if (img == resident_.end() || pv == packed_.end() || !img->second.bytes.empty() ||
        pv->second.buffers.size() != 1)
      return;
    img->second.bytes = std::move(pv->second.buffers[0]);
  }

  std::span<const float> row_of(const ValueRef& r, const std::vector<float>& v) const {
    const int64_t rows = plan_.graph.seq;
    TESSERA_CHECK(rows > 0 && static_cast<int64_t>(v.size()) % rows == 0,
                  "executor: {} has {} values, not {} rows", r.str(), v.size(), rows);
    const int64_t row = last_row_ < 0 ? rows - 1 : last_row_ - (mutant_on(Mutant::exec_last_row_prev) && last_row_ > 0 ? 1 : 0);
    if (row >= rows)
      throw_error<UsageError>("executor: {} takes row {} of a value with {} rows", r.str(), row,
                              rows);
    const size_t width = v.size() / static_cast<size_t>(rows);
    return std::span<const float>(v).subspan(static_cast<size_t>(row) * width, width);
  }

  const Plan& plan_;
  const Values& inputs_;
  const std::set<std::string>* keep_;
  const std::map<std::string, KeepRows>* keep_rows_;
  Values rows_;  // the kept rows of keep_rows_' values
  int64_t last_row_;
  // Of each value: the index of the last step that reads it, and the layouts
  // its readers read it in (kValues: as values), pointing into the plan.
  // Hashed: a decode token builds them and looks them up for every launch.
  struct Readers {
    size_t last = 0;
    std::vector<const std::string*> layouts;
  };
  static inline const std::string kValues;
  std::unordered_map<std::string, Readers> readers_;
  Values values_;
  std::unordered_map<std::string, PackedValue> packed_;
  std::map<std::string, Executor::ResidentImage>& resident_;
};

// The packed weight buffers of one launch as read-only host views: the
// simulator's DMAs read them where they are (the mapped packed-weights file),
// nothing is copied or swapped.
void add_views(const compiler::PackedWeights::Buffers& buffers, const std::string& key, npu::HostViews& views) {
  for (const auto& [name, b] : buffers)
    TESSERA_CHECK(views.emplace(name, b.bytes()).second, "executor: host buffer '{}' of weight layout {} is "
                  "already taken by another input of the step", name, key);
}

// The exec_swap_gate_up mutant's wrong binding: L1's gate and up layouts exchanged.
std::string swap_gate_up(std::string key) {
  for (const auto& [a, b] : {std::pair{"w:L1.gate_proj@", "w:L1.up_proj@"}, std::pair{"w:L1.up_proj@", "w:L1.gate_proj@"}})
    if (key.starts_with(a)) return b + key.substr(std::string(a).size());
  return key;
}

const compiler::PackedWeights::Buffers& weight_buffers(const compiler::PackedWeights& w, const Launch& l,
                                                       size_t input) {
  std::string key =
      input < l.weight_layouts.size() ? l.weight_layouts[input] : std::string();
  if (mutant_on(Mutant::exec_swap_gate_up)) key = swap_gate_up(key);
  if (key.empty())
    throw_error<InternalError>("executor: step {} has no weight layout key for its input {}",
                               l.name, input);
  const compiler::PackedWeights::Buffers* buffers = w.find(key);
  if (buffers == nullptr)
    throw_error<InternalError>("executor: step {} needs weight layout '{}', which the packed "
                               "weights (model '{}', {} layouts) do not hold", l.name, key,
                               w.model, w.keys().size());
  return *buffers;
}

// Puts a producer's bytes into the input buffers of a reader with the same layout.
void take_packed(const Launch& l, size_t input, const PackedValue& v, npu::HostMemory& host) {
  const auto& names = l.in_buffers.at(input);
  TESSERA_CHECK(names.size() == v.buffers.size(), "executor: step {} input {} spans {} buffers, its "
                "producer wrote {}", l.name, input, names.size(), v.buffers.size());
  for (size_t b = 0; b < names.size(); ++b) {
    auto& dst = host.at(names[b]);
    TESSERA_CHECK(dst.size() == v.buffers[b].size(), "executor: step {} buffer {} has {} bytes, "
                  "its producer's {}", l.name, names[b], dst.size(), v.buffers[b].size());
    std::memcpy(dst.data(), v.buffers[b].data(), dst.size());
  }
}

// Whether a producer's bytes can be handed to input `input` as read-only
// views instead (no zero-fill, no copy: a resident KV cache is R rows
// whatever the position): the reader's design never writes those buffers
// and no other input of the launch packs into them.
bool viewable(const Launch& l, size_t input, const npu::Design& d) {
  for (const std::string& name : l.in_buffers.at(input)) {
    for (size_t j = 0; j < l.in_buffers.size(); ++j)
      if (j != input && std::ranges::find(l.in_buffers[j], name) != l.in_buffers[j].end()) return false;
    for (const npu::Launch& dl : d.launches)
      for (const npu::DmaTask& t : dl.sequence)
        if (!t.to_device && t.host_buffer == name) return false;
  }
  return true;
}

// A resident kv_append's cache buffer: the image the executor kept from the
// last run (rows >= its `rows` zero, so packing rows [0, T) over it gives
// the bytes a zero-filled buffer would), or zeros when there is none, it is
// laid out otherwise, or it holds rows past T (a new prompt). The layout is
// named by the tiles that fix it (R rows, head-major by D): the activation
// layout key of the cache probes T rows, so it changes with every position.
//
// Returns -1 without a resident cache, else the rows [0, r) of the lent
// image that already hold the caller's cache: none unless the caller only
// appends (Executor::set_append_only) and the image is the one its last run
// left (same layout, no rows past T).
int64_t lend_resident(Executor& exec, const Launch& l, const kernels::BuiltOp& op, npu::HostMemory& host) {
  if (op.shape.op != "kv_append" || !op.tiles.count("cache_rows")) return -1;
  int64_t bytes = -1;
  for (const npu::HostBuffer& h : op.design.host_buffers)
    if (h.name == "cache") bytes = h.bytes;
  TESSERA_CHECK(bytes >= 0, "executor: resident kv_append {} has no 'cache' host buffer", l.name);
  const auto tile = [&](const char* k) { return op.tiles.count(k) ? op.tiles.at(k) : int64_t{0}; };
  const std::string layout = fmt::format("kv_dim={} cache_rows={} cache_head_dim={}", op.shape.dim("kv_dim"),
                                         tile("cache_rows"), tile("cache_head_dim"));
  Executor::ResidentImage& img = exec.resident_images()[l.name];
  std::vector<std::byte> image = std::move(img.bytes);
  img.bytes = {};
  const int64_t T = op.shape.dim("T");
  const bool same = static_cast<int64_t>(image.size()) == bytes && img.layout == layout;
  if (!same) image.assign(static_cast<size_t>(bytes), std::byte{0});
  else if (img.rows > T) std::fill(image.begin(), image.end(), std::byte{0});
  const int64_t in_place = exec.append_only() && same && img.rows <= T ? img.rows : 0;
  img.layout = layout;
  img.rows = T;  // after the run: pack wrote rows < T, the padded run wrote zeros back past T
  host["cache"] = std::move(image);
  return in_place;
}

// kv_append's inputs: the new rows, then the cache they are written into.
constexpr size_t kCacheInput = 1;

// The rows the last run appended are the ones the caller copied out of its
// result: if the caller's values of them differ from the image's (a session
// that kept another row), the image is not what the caller holds, and every
// row is packed again.
int64_t check_appended(const Executor::ResidentImage& img, const kernels::BuiltOp& op, const npu::HostMemory& host,
                       std::span<const float> cache, int64_t in_place) {
  const int64_t first = img.appended_first, count = img.appended_rows;
  const int64_t width = op.shape.dim("kv_dim");
  if (in_place <= 0 || !op.unpack_rows || !op.pack_rows || first < 0 || first + count > in_place ||
      static_cast<int64_t>(cache.size()) < (first + count) * width)
    return 0;
  const std::vector<float> held = op.unpack_rows(0, host, first, count);
  const auto mine = cache.subspan(static_cast<size_t>(first * width), static_cast<size_t>(count * width));
  return std::equal(held.begin(), held.end(), mine.begin(), mine.end(),
                    [](float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); })
             ? in_place
             : 0;
}

// The activation inputs of a launch in input order (as run_op packs them):
// a producer's bytes copied, or the values packed; `viewed` inputs are
// already read-only views.
void pack_inputs(const Launch& l, const Node& node, const ValueStore& values,
                 const std::vector<bool>& viewed, npu::HostMemory& host, int64_t cache_in_place) {
  const kernels::BuiltOp& op = *l.op;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const ValueRef& r = node.inputs[i];
    if (r.kind == ValueKind::weight || viewed[i]) continue;
    if (const PackedValue* pv = values.packed(r, l.in_layouts.at(i))) {
      take_packed(l, i, *pv, host);
      continue;
    }
    std::span<const float> v = values.get(r, l.name);
    const int64_t want = shape_numel(op.inputs[i].shape);
    if (static_cast<int64_t>(v.size()) != want) {
      const std::string msg = fmt::format("executor: step {} input {} has {} values, {} needs {}",
                                          l.name, r.str(), v.size(), op.shape.key(), want);
      if (r.kind == ValueKind::host) throw InputError(msg);
      throw InternalError(msg);
    }
    if (i == kCacheInput && cache_in_place > 0) op.pack_rows(i, v, host, cache_in_place);
    else op.pack(i, v, host);
  }
}

// Producer bytes the reader only reads become views. A pack() of another
// input may still write into such a buffer (kv_append's cache carries the
// padded stream rows of its new rows): then every view of the launch's
// activations turns back into a copy and the inputs are packed again in
// order, which gives the bytes a zero-filled copy would; later runs of the
// step pack in order at once (Executor::packs_in_order).
void prepare_inputs(const Launch& l, const Node& node, const ValueStore& values,
                    npu::HostMemory& host, npu::HostViews& views, std::set<std::string>& packs_in_order,
                    int64_t cache_in_place) {
  const kernels::BuiltOp& op = *l.op;
  std::vector<bool> viewed(node.inputs.size(), false);
  const bool in_order = packs_in_order.count(l.name) > 0;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (in_order || node.inputs[i].kind == ValueKind::weight || !viewable(l, i, op.design)) continue;
    const PackedValue* pv = values.packed(node.inputs[i], l.in_layouts.at(i));
    if (pv == nullptr || pv->buffers.size() != l.in_buffers[i].size()) continue;
    for (size_t b = 0; b < pv->buffers.size(); ++b) views.emplace(l.in_buffers[i][b], pv->buffers[b]);
    viewed[i] = true;
  }
  for (const npu::HostBuffer& h : op.design.host_buffers) {
    auto v = views.find(h.name);
    // Zero-filled first, as run_op does: padding no pack() writes must read 0.
    if (v == views.end()) {
      if (!host.count(h.name)) host[h.name].assign(static_cast<size_t>(h.bytes), std::byte{0});
    } else if (v->second.size() != static_cast<size_t>(h.bytes)) {
      throw_error<InternalError>("executor: step {}: host view '{}' has {} bytes, the design "
                                 "declares {}", l.name, h.name, v->second.size(), h.bytes);
    }
  }
  pack_inputs(l, node, values, viewed, host, cache_in_place);
  bool collided = false;
  for (size_t i = 0; i < node.inputs.size(); ++i)
    for (const std::string& name : viewed[i] ? l.in_buffers[i] : std::vector<std::string>{})
      collided = collided || host.count(name) > 0;
  if (!collided) return;
  packs_in_order.insert(l.name);
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (!viewed[i]) continue;
    for (const std::string& name : l.in_buffers[i]) {
      host[name].resize(views.at(name).size());
      views.erase(name);
    }
    viewed[i] = false;
  }
  pack_inputs(l, node, values, viewed, host, cache_in_place);
}

// One launch of an NPU step: weights viewed in place, activations packed (or taken
// as the producer's bytes when the layouts match), the design simulated.
void run_npu_launch(const Launch& l, const Node& node, ValueStore& values,
                    const compiler::PackedWeights& weights, Executor& exec, const npu::Simulator& sim,
                    size_t step) {
  TESSERA_CHECK(l.op != nullptr, "executor: NPU step {} has no built op", l.name);
  const kernels::BuiltOp& op = *l.op;
  TESSERA_CHECK(op.inputs.size() == node.inputs.size() && op.outputs.size() == 1,
                "executor: step {} ({}) has {} inputs / {} outputs, its node {} inputs", l.name,
                op.shape.key(), op.inputs.size(), op.outputs.size(), node.inputs.size());
  npu::HostMemory host;
  npu::HostViews views;
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (node.inputs[i].kind == ValueKind::weight) add_views(weight_buffers(weights, l, i), l.weight_layouts[i], views);
  int64_t in_place = lend_resident(exec, l, op, host);
  const bool resident = in_place >= 0;
  if (in_place > 0)
    in_place = check_appended(exec.resident_images().at(l.name), op, host,
                              values.get(node.inputs.at(kCacheInput), l.name), in_place);
  prepare_inputs(l, node, values, host, views, exec.packs_in_order(), in_place);
  // A patched design depends on the packed values: validated on every run.
  if (op.patch) sim.run(op.patch(op.design, host), host, &views);
  else sim.run_bytes(exec.prepared(l.op), host, &views);
  const KeepRows* rows = values.kept_rows(l.name);
  const int64_t out_rows = op.outputs[0].shape.empty() ? 0 : op.outputs[0].shape[0];
  if (rows && op.unpack_rows && rows->width * out_rows == shape_numel(op.outputs[0].shape) &&
      !values.kept(l.name) && !values.read_as_values(l.name, l.out_layout))
    values.put_rows(l.name, op.unpack_rows(0, host, rows->first, rows->count));
  else if (values.wants_values(l.name, l.out_layout)) values.put(l.name, step, op.unpack(0, host));
  if (values.wants_packed(l.name, l.out_layout)) {
    PackedValue pv{l.out_layout, {}};
    for (const std::string& b : l.out_buffers) pv.buffers.push_back(std::move(host.at(b)));
    values.put_packed(l.name, std::move(pv));
  } else if (resident) {
    exec.resident_images()[l.name].bytes = std::move(host.at("cache"));
  }
  if (resident) {  // the image comes back now, or from the value store once its readers ran
    Executor::ResidentImage& img = exec.resident_images()[l.name];
    img.appended_first = op.shape.dim("pos");
    img.appended_rows = op.shape.dim("M");
  }
}

std::vector<float> run_host_step(const Launch& l, const Node& node, const ValueStore& values,
                                 const compiler::PackedWeights& weights) {
  const std::string& op = l.shape.op;
  if (op == "embedding") {
    const auto& buffers = weight_buffers(weights, l, 1);
    auto table = buffers.find("table");
    if (table == buffers.end())
      throw_error<InternalError>("executor: step {}: weight layout '{}' has no 'table' buffer",
                                 l.name, l.weight_layouts[1]);
    return host_embedding(l.shape, values.get(node.inputs[0], l.name), table->second.bytes());
  }
  if (op == "kv_append") {
    kernels::OpShape shape = l.shape;
    if (mutant_on(Mutant::exec_kv_write_prev) && node.layer == 1 && shape.dim("pos") > 0) shape.dims["pos"] -= 1;
    return host_kv_append(shape, values.get(node.inputs[0], l.name),
                          values.get(node.inputs[1], l.name));
  }
  if (op == "argmax") return host_argmax(l.shape, values.get(node.inputs[0], l.name));
  throw_error<InternalError>("executor: step {}: op '{}' has no host implementation (host steps: "
                             "embedding, kv_append, argmax)", l.name, op);
}

// The simulator looks kernels up in the global registry: fill it first.
const npu::DeviceSpec& with_tile_kernels(const npu::DeviceSpec& spec) {
  kernels::ensure_tile_kernels_registered();
  return spec;
}

}  // namespace

Executor::Executor(const npu::DeviceSpec& spec, const compiler::PackedWeights& weights)
    : spec_(spec), weights_(&weights), sim_(with_tile_kernels(spec_)) {}

const npu::PreparedDesign& Executor::prepared(const std::shared_ptr<const kernels::BuiltOp>& op) {
  auto it = prepared_.find(op.get());
  if (it == prepared_.end()) it = prepared_.emplace(op.get(), std::pair(op, sim_.prepare(op->design))).first;
  return *it->second.second;
}

ExecResult Executor::run(const Plan& plan, const Values& inputs, const std::set<std::string>* keep,
                         const std::function<void(size_t, size_t)>& progress, int64_t last_row,
                         const std::map<std::string, KeepRows>* keep_rows) {
  ValueStore values(plan, inputs, keep, keep_rows, last_row, resident_);
  ExecResult result;
  const auto t_run = Clock::now();
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& step = plan.steps[i];
    TESSERA_CHECK(!step.launches.empty(), "executor: step {} of {} has no launches", i, plan.steps.size());
    const auto t0 = Clock::now();
    std::vector<LaunchRecord> launches;
    launches.reserve(step.launches.size());
    // A fused step's launches run in sequence, handing packed values on.
    for (const Launch& l : step.launches) {
      TESSERA_CHECK(l.node < plan.graph.nodes.size(), "executor: step {} names node {} of {}",
                    l.name, l.node, plan.graph.nodes.size());
      const Node& node = plan.graph.nodes[l.node];
      const auto t_launch = Clock::now();
      if (step.kind == StepKind::npu) run_npu_launch(l, node, values, *weights_, *this, sim_, i);
      else values.put(node.output.str(), i, run_host_step(l, node, values, *weights_));
      const double predicted =
          step.kind == StepKind::npu ? l.timing->total_seconds - l.timing->overhead_seconds : l.host_seconds;
      launches.push_back({l.name, predicted, seconds_since(t_launch)});
    }
    values.release(plan, step, i);
    if (weights_->release_after_use)
      for (const Launch& l : step.launches)
        for (const std::string& key : l.weight_layouts)
          if (!key.empty() && weights_->contains(key) && weights_->releases(key)) weights_->release_pages(key);
    StepRecord rec{step.name(), step.front().shape.op, step.kind == StepKind::npu, step.seconds(),
                   seconds_since(t0), std::move(launches)};
    result.predicted_seconds += rec.predicted_seconds;
    result.steps.push_back(std::move(rec));
    if (progress) progress(i + 1, plan.steps.size());
  }
  result.host_seconds = seconds_since(t_run);
  result.values = values.take();
  return result;
}

}  // namespace tessera::runtime
