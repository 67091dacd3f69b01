// Thresholds of phases 2, 3 and 6 (deploy_thresholds.h). Common ground, as in
// thresholds.cpp: bf16 unit roundoff u = 2^-8; relative figures are relative
// to max |ref| of the tensor (metrics.h).
//
// How errors compound through a block (phase 2). Each op on the NPU adds an
// error bounded by its phase-1 row (that bound already covers its own bf16
// roundings of inputs, weights and output). The errors of successive ops come
// from different roundings, so they are independent: they add in quadrature,
// not linearly, and the input error of an op reaches its output with gain ~1
// (linear maps, norms and the residual add preserve relative error to first
// order; attention averages it). So a tap's bound is the root sum of squares
// of the phase-1 bounds of the ops on the worst path from the inputs to it.
// For the Llama h_out that is sqrt(4^2+8^2+4^2+16^2+8^2+4^2+4^2+8^2+6^2+8^2+4^2)u
// = 25u ~ 0.098 for max_rel and 4.5u for mean_rel.
#include "tessera/pipeline/deploy_thresholds.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tessera/core/error.h"

namespace tessera::pipeline {

namespace {
constexpr double u = 1.0 / 256.0;  // bf16 unit roundoff 2^-8
}

const std::vector<GateRule>& phase2_rules() {
  static const std::vector<GateRule> t = {
      {"path_combination", 2.0,
       "per-op bounds add in quadrature along the worst path (exponent 2): successive ops round "
       "independently, so their errors are uncorrelated"},
      {"rms_over_mean", 1.25,
       "rms / mean of |error| for roughly Gaussian rounding noise (sqrt(pi/2))"},
      {"max_over_rms_ref", 4.0,
       "max |ref| / rms ref of an activation over thousands of elements (~4 for Gaussian-like "
       "values): turns the mean_rel budget (relative to max) into an rms error relative to rms"},
      {"cosine_from_rms", 0.5,
       "cosine = 1 - e^2/2 for a relative rms error e: min_cosine = 1 - 0.5 (1.25 * 4 * mean "
       "budget)^2, the same for pearson; catches structural bugs (permuted heads, wrong rows), "
       "the max/mean bounds catch small ones"},
  };
  return t;
}

const std::vector<GateRule>& phase3_rules() {
  static const std::vector<GateRule> t = {
      {"layer_cosine_loss", 1.0,
       "x (1 - phase-2 h_out cosine floor): the cosine one block may lose. Cosine loss is e^2/2 "
       "and independent per-layer errors add in squares, so losses add linearly: layer i must "
       "keep cos >= 1 - (i+1) * loss (floor) and cos[i] >= cos[i-1] - loss (no sudden drop: one "
       "layer losing more than a whole block's budget is a bug in that layer, not accumulation)"},
      {"logits_blocks", 1.0,
       "the LM head (final norm + linear) counts as one more block for the logits cosine floor"},
      {"top1_gap_factor", 2.0,
       "top-1 may differ only when the oracle's top-2 gap < 2 x the measured max |logit error|: "
       "each of the two logits can move by max_abs in opposite directions, so a larger gap "
       "cannot flip without a bug"},
      {"top5_min_overlap", 4.0,
       "of the oracle's 5 best tokens, >= 4 in the NPU's 5 best: the 5th and 6th logits are "
       "often closer than the bf16 error, so one swap at the boundary is legitimate; two are not"},
  };
  return t;
}

const std::vector<GateRule>& phase6_rules() {
  static const std::vector<GateRule> t = {
      {"margin_sigmas", 7.0,
       "tie margin = 7 x sqrt(2) x the predicted sd of one logit's error, from phase 3's logits "
       "rounding model (phase-1 rounding counts summed over every op on the path, all layers and "
       "the LM head): the two logits' errors are independent, so their difference has sqrt(2) "
       "times the sd; 7 sd is the statistical gates' z_limit. Fixed before the run: a buggy "
       "deployment cannot widen its own tolerance (the old 4 x measured max error did). Decode "
       "runs GEMV and decode attention, whose rounding counts equal prefill's"},
      {"margin_floor_u", 2.0,
       "the margin is at least 2u x max |logit| of the step: the NPU's logits are bf16, which "
       "cannot order two logits closer than one rounding of each"},
      {"default_continuation", 32.0,
       "greedy tokens by default (tessera deploy --tokens): enough that KV-cache positions far "
       "from the prompt are exercised; the fast unit tests run fewer to stay within seconds"},
  };
  return t;
}

double rule_value(const std::vector<GateRule>& table, const std::string& name) {
  for (const auto& r : table)
    if (r.name == name) return r.value;
  throw_error<InternalError>("no gate rule '{}' (deploy_thresholds.cpp)", name);
}

// The source weights reach the NPU rounded to bf16 when they are packed (the
// oracle computes with them as given: FP32, or dequantized GGUF values that
// bf16 need not hold), one more rounding per weight input: of each summand of
// a linear (row kind, like a rounded input), of each element an elementwise
// weight scales or a gather copies (elem kind). bf16-exact weights make this
// an overestimate by at most one rounding, never a false failure.
namespace {
std::pair<double, double> weight_roundings(const compiler::Node& n) {
  double elem = 0, row = 0;
  for (const compiler::ValueRef& r : n.inputs)
    if (r.kind == compiler::ValueKind::weight) (n.shape.op == "linear" ? row : elem) += 1;
  return {elem, row};
}
}  // namespace

std::map<std::string, Threshold> block_thresholds(const compiler::Graph& g) {
  // Squared max / mean budgets of every activation produced so far, and the
  // roundings (stat_rules() "path_roundings") that reached it.
  std::map<std::string, std::pair<double, double>> sq;
  std::map<std::string, double> roundings;
  std::map<std::string, Threshold> out;
  const auto& r2 = phase2_rules();
  const double k = rule_value(r2, "rms_over_mean") * rule_value(r2, "max_over_rms_ref");
  for (const compiler::Node& n : g.nodes) {
    const Threshold op = kernel_threshold(n.shape);
    double in_max = 0, in_mean = 0, in_round = 0;
    for (const compiler::ValueRef& r : n.inputs) {
      if (r.kind != compiler::ValueKind::activation) continue;  // weights / host values: exact inputs
      compiler::ValueRef whole = r;
      whole.last_row = false;
      auto it = sq.find(whole.str());
      if (it == sq.end()) continue;
      in_max = std::max(in_max, it->second.first);
      in_mean = std::max(in_mean, it->second.second);
      in_round = std::max(in_round, roundings[whole.str()]);
    }
    const double m2 = in_max + op.max_rel * op.max_rel, a2 = in_mean + op.mean_rel * op.mean_rel;
    const std::string name = n.output.str();
    sq[name] = {m2, a2};
    const double gain = stat_rule("path_roundings");
    const auto [w_elem, w_row] = weight_roundings(n);
    roundings[name] = gain * in_round + op.noise.elem_roundings + op.noise.row_roundings + w_elem + w_row;
    Threshold t;
    t.noise = op.noise;
    t.noise.exact_bf16 = false;  // exact only on bf16 inputs (phase 1), not after a path
    t.noise.path = true;
    t.noise.elem_roundings += w_elem;
    t.noise.row_roundings = gain * in_round + op.noise.row_roundings + w_row;
    t.op = n.shape.op;
    t.max_rel = std::sqrt(m2);
    t.mean_rel = std::sqrt(a2);
    const double e = k * t.mean_rel;
    t.min_cosine = t.min_pearson = 1 - rule_value(r2, "cosine_from_rms") * e * e;
    t.reason = "root sum of squares of the phase-1 bounds on the worst path to " + name;
    out[name] = t;
  }
  return out;
}

double layer_cosine_loss(const compiler::Graph& one_layer) {
  const auto t = block_thresholds(one_layer);
  auto it = t.find("L0.h_out");
  TESSERA_CHECK(it != t.end(), "graph of {} has no L0.h_out", one_layer.model);
  return rule_value(phase3_rules(), "layer_cosine_loss") * (1 - it->second.min_cosine);
}

Threshold depth_threshold(const Threshold& block, double loss, double blocks, double prev_cos) {
  Threshold t = block;
  t.max_rel = block.max_rel * std::sqrt(blocks);
  t.mean_rel = block.mean_rel * std::sqrt(blocks);
  t.min_cosine = std::max(1 - blocks * loss, prev_cos - loss);
  t.min_pearson = 1 - blocks * loss;
  // Every block's roundings reach the tap as row-scale errors (stat_rules()).
  const double per_block = block.noise.row_roundings + block.noise.elem_roundings;
  t.noise.row_roundings = blocks * per_block - block.noise.elem_roundings;
  t.reason = fmt::format("{} blocks of the phase-2 h_out budget; cosine >= max(floor {:.6f}, previous "
                         "layer {:.6f} - {:.6f})",
                         blocks, 1 - blocks * loss, prev_cos, loss);
  return t;
}

}  // namespace tessera::pipeline
