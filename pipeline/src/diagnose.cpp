// The diagnosers' engine (diagnose.h): the judging rule every numeric
// hypothesis goes through, and the loop over the registry.
#include "tessera/pipeline/diagnose.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "diagnose_internal.h"
#include "tessera/compiler/graph.h"
#include "tessera/core/error.h"
#include "tessera/pipeline/metrics.h"
#include "tessera/pipeline/reference_ops.h"
#include "tessera/pipeline/thresholds.h"

namespace tessera::pipeline {

namespace diag {

std::vector<float> reference(const kernels::OpShape& s, const std::vector<std::vector<float>>& in) {
  const std::vector<std::span<const float>> spans(in.begin(), in.end());
  return reference_op(s, spans);
}

namespace {

// The op's phase-1 gate with its rounding model sized to this output.
Threshold op_gate(const OpCase& c) {
  Threshold t = kernel_threshold(c.shape);
  const int64_t hd = c.shape.dims.count("head_dim") ? c.shape.dim("head_dim") : 0;
  t.noise.row_width = stat_row_width(c.shape.op, hd, c.npu.size(), c.rows);
  return t;
}

// The deterministic part of a gate: for subsets that break the rows.
Threshold plain(Threshold t) {
  t.noise.enabled = false;
  t.noise.exact_bf16 = false;
  return t;
}

bool finite(float x) { return std::isfinite(x); }

// A hypothesis that predicts non-finite values (an overflowing softmax)
// reproduces the NPU only if the non-finite elements are exactly the same
// ones; the rest is judged on the deterministic gate.
std::optional<Metrics> compare_nonfinite(const std::vector<float>& hyp, const std::vector<float>& npu,
                                         const Threshold& gate, std::string& why) {
  std::vector<float> h, g;
  int64_t predicted = 0;
  for (size_t i = 0; i < hyp.size(); ++i) {
    if (finite(hyp[i]) != finite(npu[i])) {
      why = fmt::format("non-finite elements differ (first at {})", i);
      return std::nullopt;
    }
    if (!finite(hyp[i])) {
      ++predicted;
      continue;
    }
    h.push_back(hyp[i]);
    g.push_back(npu[i]);
  }
  Metrics m = compare(h, g);
  if (const auto f = failed_metrics(m, plain(gate)); !f.empty()) {
    why = fmt::format("finite part fails {}", fmt::join(f, ", "));
    return std::nullopt;
  }
  m.non_finite = predicted;  // the same elements as predicted: reported, not failed
  return m;
}

std::string figures(const Metrics& m) {
  return fmt::format("cosine {:.6f}, max_rel {:.3g}, mean_rel {:.3g}", m.cosine, m.max_rel, m.mean_rel);
}

}  // namespace

Outcome judge(const OpCase& c, const std::vector<Variant>& variants) {
  Outcome o;
  if (c.npu.empty() || variants.empty()) return o;
  const Threshold gate = op_gate(c);
  const std::vector<float> correct = reference(c.shape, c.inputs);
  const Metrics ok = compare(correct, c.npu, gate.noise);
  const std::vector<std::string> ok_fails = failed_metrics(ok, gate);
  if (ok_fails.empty()) {
    o.tried.push_back("the NPU output passes the op's gate against the correct op: nothing to explain");
    return o;
  }
  // Two fp32 results are told apart by the whole gate (a systematic shift
  // below the max_rel limit still moves the statistics), but not bit-exactness.
  Threshold distinct = gate;
  distinct.noise.exact_bf16 = false;
  std::optional<Metrics> best;
  for (const Variant& v : variants) {
    if (v.out.size() != c.npu.size()) continue;
    const bool predicts_nonfinite = std::any_of(v.out.begin(), v.out.end(), [](float x) { return !finite(x); });
    if (!predicts_nonfinite && failed_metrics(compare(correct, v.out, distinct.noise), distinct).empty()) {
      o.tried.push_back(v.label + ": indistinguishable from the correct op on these inputs");
      continue;
    }
    std::string why;
    std::optional<Metrics> m;
    if (predicts_nonfinite) {
      m = compare_nonfinite(v.out, c.npu, gate, why);
    } else {
      const Metrics h = compare(v.out, c.npu, gate.noise);
      const auto f = failed_metrics(h, gate);
      if (f.empty()) m = h;
      else why = fmt::format("{}; fails {}", figures(h), fmt::join(f, ", "));
    }
    if (!m) {
      o.tried.push_back(fmt::format("{}: {}", v.label, why));
      continue;
    }
    if (best && !(m->mean_rel < best->mean_rel)) continue;
    best = m;
    o.reproduced = true;
    o.distance = m->mean_rel;
    o.detail = v.label;
    const std::string nf = m->non_finite > 0
                               ? fmt::format(", the same {} non-finite elements", m->non_finite)
                               : std::string();
    o.evidence = fmt::format(
        "re-running the oracle op with {}: NPU vs it {}{} (passes the op's phase-1 gate); NPU vs the "
        "correct op {} (fails {})",
        v.label, figures(*m), nf, figures(ok), fmt::join(ok_fails, ", "));
  }
  return o;
}

}  // namespace diag

std::vector<DiagnoserInfo> diagnosers() {
  std::vector<DiagnoserInfo> out;
  for (const diag::Entry& e : diag::registry()) out.push_back({e.name, e.ops, e.hypothesis});
  return out;
}

Diagnosis diagnose(const OpCase& c) {
  Diagnosis d;
  d.where = fmt::format("{} ({})", c.where, compiler::shape_text(c.shape));
  std::optional<diag::Outcome> best;
  const diag::Entry* winner = nullptr;
  for (const diag::Entry& e : diag::registry()) {
    const bool applies = std::any_of(e.ops.begin(), e.ops.end(), [&](const std::string& op) {
      return op == "*" || op == c.shape.op;
    });
    if (!applies || (e.numeric && (c.npu.empty() || c.inputs.size() != c.activation.size()))) continue;
    diag::Outcome o;
    try {
      o = e.test(c);
    } catch (const Error& err) {  // a hypothesis that cannot be run on this case says so; the gate's verdict stands
      d.tried.push_back(fmt::format("{}: not testable here: {}", e.name, err.what()));
      continue;
    }
    for (const std::string& t : o.tried) d.tried.push_back(fmt::format("{}: {}", e.name, t));
    if (o.reproduced && (!best || o.distance < best->distance)) {
      best = std::move(o);
      winner = &e;
    }
  }
  if (winner == nullptr) {
    d.diagnoser = "unknown";
    d.cause = "unknown: no diagnoser's hypothesis reproduces the NPU output";
    d.evidence = d.tried.empty() ? fmt::format("no diagnoser has a hypothesis for op {}", c.shape.op)
                                 : fmt::format("{} hypotheses tested, none reproduced it", d.tried.size());
    return d;
  }
  d.diagnoser = winner->name;
  d.cause = best->detail.empty() ? winner->cause : fmt::format("{} ({})", winner->cause, best->detail);
  d.evidence = best->evidence;
  return d;
}

std::string Diagnosis::line() const {
  std::string s = fmt::format("likely cause: {} [{}] at {}; evidence: {}", cause, diagnoser, where, evidence);
  if (!known() && !tried.empty()) s += fmt::format("; tried: {}", fmt::join(tried, "; "));
  return s;
}

nlohmann::json Diagnosis::to_json() const {
  return {{"where", where}, {"diagnoser", diagnoser}, {"cause", cause}, {"evidence", evidence}, {"tried", tried}};
}

}  // namespace tessera::pipeline
