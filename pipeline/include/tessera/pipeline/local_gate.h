#pragma once
// Local (conditional) gates along an op path, issue 12: the statistical
// metrics of metrics.h, gated again after phase 1.
//
// Why: along a path (phases 2, 3, 6) the error of a tap is mostly the error it
// inherited: every output of a linear shares its input's error, so the
// elements' errors are correlated and the z-scores of an end-to-end
// comparison, which assume independent errors, reached |z| 126 on an honest
// real SmolLM2 (NoiseModel::path). A correlated error has no effective sample
// size one can predict from the rounding counts alone (it depends on the
// weights), so instead of modelling the shared component we remove it: each
// op's NPU output is compared with the FP32 oracle op applied to the NPU's
// own inputs of that op (its activation inputs as the executor recorded them,
// bf16 values; its weights and host inputs from the source and the oracle, in
// the precision the NPU takes them: bf16, the RoPE tables f32). Conditional on its inputs, the only
// error left is the op's own roundings, independent per element: exactly the
// situation phase 1's rounding model and thresholds (kernel_threshold) were
// derived for, before any run, so the whole phase-1 row gates it, z-scores and
// bf16 exactness included. A bug anywhere between the source and an op's
// output (a kernel, a builder, the executor binding a wrong buffer, a host
// input the session computes wrongly, a wrong weight layout) then shows up at
// that op as a deviation far beyond its own rounding, while the honest
// upstream drift, however correlated, cancels.
//
// The end-to-end comparisons with the oracle stay as they are (max / mean /
// cosine gated along the path, statistics reported): they catch what is
// consistent at every op but wrong overall (an op the graph lacks).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tessera/compiler/graph.h"
#include "tessera/compiler/packed_weights.h"
#include "tessera/pipeline/thresholds.h"

namespace tessera::pipeline {

struct LocalCheck {
  std::string value;  // the node's output, ValueRef::str() ("L0.q_rot")
  Metrics metrics;
  Threshold threshold;  // kernel_threshold(node.shape), phase 1's row
};

// The reference's own value of a weight or host input (source weights, the
// oracle's RoPE table and token ids), unrounded: local_checks rounds what the
// NPU takes as bf16 (weights, KV caches).
using FixedValue = std::function<std::vector<float>(const compiler::ValueRef&)>;

// Whether the NPU takes an input as bf16 (activations leave bf16 kernels, weights are packed
// bf16, the KV caches hold bf16 rows) rather than as given (token ids are
// integers, the RoPE design takes f32 cos / sin tables): phase 1 and the local
// gates feed each op what the deployment feeds it.
bool deployed_as_bf16(const compiler::ValueRef& r);

// Weights as the NPU takes them (bf16-rounded, held as FP32), by
// ValueRef::str(): a caller gating many calls of one model (phase 6's decode
// steps) keeps one store so each weight is fetched and rounded once, not once
// per call, up to `budget_bytes`. Past it a weight is fetched per call and
// dropped after its last use in the graph: the whole model in FP32 is 4x its
// bf16 bytes (16 GB for qwen3-4b), which no deploy's memory budget holds
// (issue 16). The store takes a quarter of the budget's fixed allowance,
// which it shares with the resident packed weights, activations and taps.
struct WeightStore {
  int64_t budget_bytes = compiler::PackedWeights::kResidentAllowance / 4;
  int64_t bytes = 0;
  std::map<std::string, std::vector<float>> values;
};

// One check per node of `g` whose output and activation inputs are all in
// `npu` (executor values by ValueRef::str()); argmax nodes are left to their
// own gate. `last_row` is the row a last_row ref takes (-1: the last), as in
// runtime::Executor::run. Nodes are visited in graph order. `weights`: see
// WeightStore (null: fetched for this call only). A weight or host input not
// in the store is dropped after the last node that reads it, so a call holds
// one at a time beside the store.
std::vector<LocalCheck> local_checks(const compiler::Graph& g,
                                     const std::map<std::string, std::vector<float>>& npu,
                                     const FixedValue& fixed, int64_t last_row = -1,
                                     WeightStore* weights = nullptr);

}  // namespace tessera::pipeline
