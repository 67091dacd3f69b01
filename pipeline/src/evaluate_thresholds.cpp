// The evaluator's audit of the gates themselves: every threshold recorded in
// phase1/2/3/6.json is compared with the canonical tables in the source
// (thresholds.h, deploy_thresholds.h) re-derived for the deployment's model,
// and every recorded check is re-judged against the canonical threshold. A
// recorded limit looser than the canonical one, or a check marked passed that
// the canonical limit fails, is a finding.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "evaluate_internal.h"
#include "tessera/compiler/graph.h"
#include "tessera/pipeline/deploy_thresholds.h"
#include "tessera/pipeline/thresholds.h"

namespace tessera::pipeline::eval {

namespace {

// Which limits of `rec` are looser than `canon` (beyond a JSON round trip).
std::vector<std::string> looser(const nlohmann::json& rec, const Threshold& canon, bool cosine_only) {
  const double eps = 1e-12;
  std::vector<std::string> out;
  auto up = [&](const char* k, double want) {
    const double got = rec.value(k, 0.0);
    if (got > want * (1 + 1e-9) + eps) out.push_back(fmt::format("{} {:.6g} > canonical {:.6g}", k, got, want));
  };
  auto down = [&](const char* k, double want) {
    const double got = rec.value(k, 1.0);
    if (got < want - eps) out.push_back(fmt::format("{} {:.8f} < canonical {:.8f}", k, got, want));
  };
  if (!cosine_only) {
    up("max_rel", canon.max_rel);
    up("mean_rel", canon.mean_rel);
    down("min_pearson", canon.min_pearson);
  }
  down("min_cosine", canon.min_cosine);
  return out;
}

struct Audit {
  Checks& c;
  int audited = 0;
  int findings = 0;
  // Compares one recorded check with its canonical threshold.
  void check(const std::string& file, const nlohmann::json& chk, const Threshold& canon, bool cosine_only = false) {
    ++audited;
    const std::string name = fmt::format("{} {}", file, chk.value("name", "?"));
    const auto loose = looser(chk.at("threshold"), canon, cosine_only);
    for (const auto& l : loose) {
      c.fail("thresholds", name, "weakened threshold: " + l);
      ++findings;
    }
    Threshold judge = canon;
    if (cosine_only) judge.max_rel = judge.mean_rel = 1e300, judge.min_pearson = -1;
    const auto broken = failed_metrics(metrics_from_json(chk.at("metrics")), judge);
    if (chk.value("passed", false) && !broken.empty()) {
      c.fail("thresholds", name,
             fmt::format("marked passed but fails the canonical threshold on {}", fmt::join(broken, ", ")));
      ++findings;
    }
  }
};

const nlohmann::json* rule_list(const nlohmann::json& j) {
  if (j.contains("details") && j["details"].contains("rules")) return &j["details"]["rules"];
  return nullptr;
}

void audit_rules(Audit& a, const nlohmann::json& j, const std::string& file, const std::vector<GateRule>& canon) {
  const nlohmann::json* rules = rule_list(j);
  if (!rules) return;
  for (const auto& r : *rules) {
    ++a.audited;
    for (const GateRule& g : canon)
      if (g.name == r.value("name", "") && r.value("value", 0.0) != g.value) {
        a.c.fail("thresholds", fmt::format("{} rule {}", file, g.name),
                 fmt::format("recorded {} != canonical {} ({})", r.value("value", 0.0), g.value, g.reason));
        ++a.findings;
      }
  }
}

// The canonical row of a local gate (local_gate.h) on `value`: phase 1's row
// of the op of `g` that produces it; nullptr-like empty op when none does.
Threshold local_threshold(const compiler::Graph& g, const std::string& value) {
  for (const compiler::Node& n : g.nodes)
    if (n.output.str() == value) return kernel_threshold(n.shape);
  return {};
}

// Audits a check named `prefix` + value against local_threshold; false when
// the name does not start with `prefix`.
bool audit_local(Audit& a, const std::string& file, const nlohmann::json& chk, const compiler::Graph& g,
                 const std::string& prefix) {
  const std::string n = chk.value("name", "");
  if (n.rfind(prefix, 0) != 0) return false;
  const Threshold t = local_threshold(g, n.substr(prefix.size()));
  if (t.op.empty()) a.c.fail("thresholds", file + " " + n, "no such op output in the model's graph");
  else a.check(file, chk, t);
  return true;
}

}  // namespace

void audit_thresholds(const Loaded& d, Checks& c) {
  if (!d.config) return;
  Audit a{c};
  const model::ModelConfig& cfg = *d.config;
  static const std::regex kDim("([A-Za-z_]+)=([0-9]+)");
  if (const auto j = read_json(d.dir, "phase1.json", c, "thresholds")) {
    for (const auto& chk : j->at("checks")) {
      kernels::OpShape shape;
      shape.op = chk.at("threshold").value("op", "");
      const std::string n = chk.value("name", "");
      for (std::sregex_iterator it(n.begin(), n.end(), kDim), end; it != end; ++it)
        shape.dims[(*it)[1]] = std::stoll((*it)[2]);
      try {
        a.check("phase1.json", chk, kernel_threshold(shape));
      } catch (const std::exception& e) {
        c.warn("thresholds", "phase1.json " + n, fmt::format("no canonical row: {}", e.what()));
      }
    }
  }
  int64_t seq = 0;
  if (const auto j = read_json(d.dir, "phase2.json", c, "thresholds")) {
    seq = (*j)["details"].value("seq", int64_t{0});
    const compiler::Graph g = compiler::build_graph(cfg, seq, 0);
    const auto canon = block_thresholds(g);
    for (const auto& chk : j->at("checks")) {
      if (audit_local(a, "phase2.json", chk, g, "local ")) continue;
      auto it = canon.find(chk.value("name", ""));
      if (it == canon.end()) c.fail("thresholds", "phase2.json " + chk.value("name", "?"), "no such tap in the model's graph");
      else a.check("phase2.json", chk, it->second);
    }
    audit_rules(a, *j, "phase2.json", phase2_rules());
  }
  double logits_floor = 1;
  if (const auto j = read_json(d.dir, "phase3.json", c, "thresholds"); j && seq > 0) {
    model::ModelConfig c1 = cfg;
    c1.num_layers = 1;
    const compiler::Graph g1 = compiler::build_graph(c1, seq, 0);
    const Threshold block = block_thresholds(g1).at("L0.h_out");
    const double loss = layer_cosine_loss(g1);
    double prev = 1;
    for (const auto& chk : j->at("checks")) {
      const std::string n = chk.value("name", "");
      int layer = -1;
      if (std::sscanf(n.c_str(), "L%d.h_out", &layer) == 1) {
        a.check("phase3.json", chk, depth_threshold(block, loss, layer + 1.0, prev));
        prev = chk.at("metrics").value("cosine", 1.0);
      } else if (n == "logits") {
        const double blocks = static_cast<double>(cfg.num_layers) + rule_value(phase3_rules(), "logits_blocks");
        const Threshold t = depth_threshold(block, loss, blocks, prev);
        a.check("phase3.json", chk, t);
        logits_floor = t.min_cosine;
      }
    }
  }
  if (const auto j = read_json(d.dir, "phase6.json", c, "thresholds")) {
    Threshold t;
    t.min_cosine = logits_floor;
    const compiler::Graph g = compiler::build_graph(cfg, std::max<int64_t>(seq, 1), 0);
    for (const auto& chk : j->at("checks"))
      if (!audit_local(a, "phase6.json", chk, g, "session prefill local ")) a.check("phase6.json", chk, t, true);
  }
  if (a.findings == 0)
    c.ok("thresholds", "phase1/2/3/6.json",
         fmt::format("{} recorded thresholds and rules equal the canonical tables (thresholds.cpp, "
                     "deploy_thresholds.cpp) re-derived for {}; every check re-judged against them",
                     a.audited, cfg.name));
}

}  // namespace tessera::pipeline::eval
