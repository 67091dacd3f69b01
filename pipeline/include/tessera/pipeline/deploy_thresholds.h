#pragma once
// Gate thresholds of phases 2 (block), 3 (model) and 6 (integration): one
// table per phase, every number with its reason (pipeline/src/
// deploy_thresholds.cpp). Phase 2's per-tap limits are not free numbers: they
// are derived from phase 1's per-op bounds (thresholds.h) along the path that
// leads to the tap in the op graph, so a model with biases or q/k norms gets
// the longer path it really has.
#include <map>
#include <string>
#include <vector>

#include "tessera/compiler/graph.h"
#include "tessera/pipeline/thresholds.h"

namespace tessera::pipeline {

struct GateRule {
  std::string name;
  double value = 0;
  std::string reason;
};

const std::vector<GateRule>& phase2_rules();
const std::vector<GateRule>& phase3_rules();
const std::vector<GateRule>& phase6_rules();
// The value of rule `name` in `table`; InternalError when it has no such row.
double rule_value(const std::vector<GateRule>& table, const std::string& name);

// Phase 2: a threshold per activation of `g` (by ValueRef::str(), "L0.q_rot"),
// from the phase-1 bounds of every op on the worst path from the graph inputs.
std::map<std::string, Threshold> block_thresholds(const compiler::Graph& g);

// Phase 3: the cosine one block may lose (1 - the phase-2 h_out cosine floor),
// which bounds both the per-layer drop and, summed over layers, the floor.
double layer_cosine_loss(const compiler::Graph& one_layer);

// Phase 3's budget after `blocks` blocks: the one-block h_out budget `block`
// with max / mean errors growing as sqrt(blocks) (independent layers add in
// quadrature) and cosine losses adding linearly: cosine >= max(1 - blocks *
// loss, prev_cos - loss) (prev_cos = 1 for the floor alone).
Threshold depth_threshold(const Threshold& block, double loss, double blocks, double prev_cos = 1);

// Phase 6's tie margin for one step's logits `ref`: margin_sigmas x sqrt(2) x
// the rounding model's sd of one logit error (noise: phase 3's logits
// threshold), never below margin_floor_u bf16 spacings of the largest logit.
// Derived before the run: a deployment's own measured error never widens it.
double tie_margin(const std::vector<float>& ref, const NoiseModel& noise);

}  // namespace tessera::pipeline
