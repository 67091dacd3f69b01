// Local (conditional) gates along an op path (local_gate.h): each op's NPU
// output against the oracle op on the NPU's own inputs, under phase 1's row.
#include "tessera/pipeline/local_gate.h"

#include <map>
#include <span>

#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/pipeline/reference_ops.h"

namespace tessera::pipeline {

using compiler::Node;
using compiler::ValueKind;
using compiler::ValueRef;

namespace {

ValueRef whole(const ValueRef& r) {
  ValueRef w = r;
  w.last_row = false;
  return w;
}

// Row `last_row` (-1: the last) of a [rows, width] value, as the executor takes it.
std::vector<float> row_of(const std::vector<float>& v, int64_t rows, int64_t last_row, const std::string& name) {
  TESSERA_CHECK(rows > 0 && static_cast<int64_t>(v.size()) % rows == 0,
                "local gate: {} has {} values, not {} rows", name, v.size(), rows);
  const int64_t row = last_row < 0 ? rows - 1 : last_row;
  TESSERA_CHECK(row < rows, "local gate: {} has no row {}", name, row);
  const size_t width = v.size() / static_cast<size_t>(rows);
  const auto at = static_cast<std::ptrdiff_t>(static_cast<size_t>(row) * width);
  return {v.begin() + at, v.begin() + at + static_cast<std::ptrdiff_t>(width)};
}

// The weight and host inputs, rounded to bf16 once per name (the LM head and
// a tied embedding share one table); weights kept across calls in the
// caller's store while it has room, the rest only until their last reader.
class FixedCache {
 public:
  FixedCache(const FixedValue& f, WeightStore* store, const compiler::Graph& g) : f_(f), store_(store) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (const ValueRef& r : g.nodes[i].inputs)
        if (r.kind != ValueKind::activation) last_use_[whole(r).str()] = i;
  }
  const std::vector<float>& get(const ValueRef& r) {
    const std::string key = whole(r).str();
    const bool storable = r.kind == ValueKind::weight && store_ != nullptr;
    if (storable)
      if (auto it = store_->values.find(key); it != store_->values.end()) return it->second;
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    std::vector<float> v = f_(whole(r));
    if (deployed_as_bf16(r)) round_bf16_inplace(v);
    const auto bytes = static_cast<int64_t>(v.size() * sizeof(float));
    if (storable && store_->bytes + bytes <= store_->budget_bytes) {
      store_->bytes += bytes;
      return store_->values.emplace(key, std::move(v)).first->second;
    }
    return cache_.emplace(key, std::move(v)).first->second;
  }
  // Drops the call's own values that no node from `node` on reads.
  void drop_before(size_t node) {
    std::erase_if(cache_, [&](const auto& kv) {
      auto it = last_use_.find(kv.first);
      return it == last_use_.end() || it->second < node;
    });
  }

 private:
  const FixedValue& f_;
  WeightStore* store_;
  std::map<std::string, size_t> last_use_;
  std::map<std::string, std::vector<float>> cache_;
};

// Rows of the op's output for the per-row fit: its M where it has one (the
// LM head takes one row of an S-row input), else the call's tokens.
int64_t rows_of(const kernels::OpShape& s, int64_t seq) {
  if (s.op != "kv_append" && s.dims.count("M")) return s.dim("M");
  return seq;
}

}  // namespace

// kernels/src/builders/rope.cpp packs its cos / sin tables as f32.
bool deployed_as_bf16(const ValueRef& r) {
  if (r.kind == ValueKind::weight) return true;
  return r.name != "token_ids" && r.name != "rope_cos" && r.name != "rope_sin";
}

std::vector<LocalCheck> local_checks(const compiler::Graph& g,
                                     const std::map<std::string, std::vector<float>>& npu,
                                     const FixedValue& fixed, int64_t last_row, WeightStore* weights) {
  std::vector<LocalCheck> out;
  FixedCache cache(fixed, weights, g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    cache.drop_before(i);
    if (n.shape.op == "argmax") continue;
    auto got = npu.find(n.output.str());
    if (got == npu.end()) continue;
    // Spans over the values where they are (the LM head's table is copied
    // per call otherwise: phase 6 gates every decode step); rows taken by a
    // last_row ref are owned here, reserved so the spans stay valid.
    std::vector<std::vector<float>> rows;
    rows.reserve(n.inputs.size());
    std::vector<std::span<const float>> spans;
    bool complete = true;
    for (const ValueRef& r : n.inputs) {
      const std::vector<float>* v = nullptr;
      if (r.kind != ValueKind::activation) {
        v = &cache.get(r);
      } else if (auto it = npu.find(whole(r).str()); it != npu.end()) {
        v = &it->second;
      } else {
        complete = false;  // a value the plan did not keep: nothing to condition on
        break;
      }
      if (r.last_row) {
        rows.push_back(row_of(*v, g.seq, last_row, r.str()));
        spans.emplace_back(rows.back());
      } else {
        spans.emplace_back(*v);
      }
    }
    if (!complete) continue;
    const std::vector<float> ref = reference_op(n.shape, spans);
    LocalCheck c{n.output.str(), {}, kernel_threshold(n.shape)};
    NoiseModel nm = c.threshold.noise;
    const int64_t hd = n.shape.dims.count("head_dim") ? n.shape.dim("head_dim") : 0;
    nm.row_width = stat_row_width(n.shape.op, hd, ref.size(), rows_of(n.shape, g.seq));
    c.metrics = compare(ref, got->second, nm);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace tessera::pipeline
