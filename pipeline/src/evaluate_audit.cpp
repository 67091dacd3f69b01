// The evaluator's audits of the artifacts themselves (evaluate.h): manifest
// integrity, the plan against the device limits and the weights, the weights
// against the source, the predicted totals against their dispatches, and
// report.json against the phase files.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>

#include <fmt/format.h>

#include "evaluate_internal.h"
#include "tessera/compiler/passes.h"
#include "tessera/core/error.h"
#include "tessera/model/mapped_pages.h"
#include "tessera/model/model_dir.h"
#include "tessera/model/tensor_table.h"
#include "tessera/npu/validator.h"
#include "tessera/pipeline/manifest.h"

namespace tessera::pipeline::eval {

namespace {

std::string slurp(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  if (!in) throw_error<FileError>("cannot read {}", f.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Recorded and re-derived figures agree when they are the same double up to
// the last digits of a JSON round trip.
bool same_figure(double recorded, double derived) {
  return std::fabs(recorded - derived) <= 1e-9 * std::max(std::fabs(recorded), std::fabs(derived));
}

void load_source(Loaded& d, const EvaluateOptions& o, Checks& c) {
  fs::path src = o.source;
  if (src.empty()) {
    const auto p0 = read_json(d.dir, "phase0.json", c, "integrity");
    if (!p0 || !p0->contains("details") || !(*p0)["details"].contains("source")) {
      c.fail("numerics", "source model", "phase0.json names no source directory; pass --source DIR");
      return;
    }
    src = (*p0)["details"]["source"].get<std::string>();
    d.deploy_prompt = (*p0)["details"].value("prompt", std::vector<int32_t>{});
  }
  try {
    model::ModelConfig sc = model::load_config(src / "config.json");
    sc.num_layers = d.config->num_layers;
    auto strip = [](nlohmann::json j) {
      j.erase("name");
      return j;
    };
    if (strip(model::config_to_json(sc)) != strip(model::config_to_json(*d.config)))
      c.fail("integrity", "model/config.json",
             fmt::format("differs from the source's config.json ({}) cut to {} layers", src.string(),
                         sc.num_layers));
    const model::ModelDir md = model::load_model_dir(src);
    model::Weights w;
    for (const auto& s : model::tensor_specs(*d.config)) w.add(s.name, md.weights.get(s.name));
    w.check_against(*d.config);
    d.source = std::move(w);
  } catch (const std::exception& e) {
    c.fail("numerics", "source model", fmt::format("cannot load {}: {}", src.string(), e.what()));
  }
}

}  // namespace

void audit_integrity(const fs::path& dir, Checks& c) {
  std::string problem;
  Manifest m = Manifest::load(dir, &problem);
  if (!problem.empty()) {
    c.fail("integrity", "manifest.json", problem);
    return;
  }
  // Phase 7 is the evaluation itself: running now, or about to be rewritten.
  std::erase_if(m.phases, [](const auto& kv) { return kv.first >= 7; });
  std::erase_if(m.artifacts, [](const auto& kv) { return kv.second.phase >= 7; });
  const auto problems = check_deployment(
      dir, m, {"model/config.json", "spec.json", "weights.safetensors", "plan_final.txt", "oracle.safetensors"});
  for (const std::string& p : problems) c.fail("integrity", "manifest.json", p);
  for (int p = 0; p <= 6; ++p)
    if (!m.phases.count(p)) c.fail("integrity", fmt::format("phase {}", p), "not in the manifest: not run or not passed");
  if (problems.empty())
    c.ok("integrity", "manifest.json",
         fmt::format("seal matches; {} artifacts match their sha256; phases 0-6 passed on one source and "
                     "options; every phase's recorded inputs are the files on disk",
                     m.artifacts.size()));
}

void load_deployment(Loaded& d, const EvaluateOptions& o, Checks& c) {
  d.dir = o.dir;
  try {
    d.config = model::load_config(d.dir / "model/config.json");
    d.packed = std::make_shared<compiler::PackedWeights>(compiler::PackedWeights::load(d.dir / "weights.safetensors"));
    d.config->name = d.packed->model;  // config.json carries no name
    const auto sj = read_json(d.dir, "spec.json", c, "integrity");
    if (!sj) return;
    d.spec = npu::DeviceSpec::from_json(*sj);
    d.cache = std::make_unique<compiler::DesignCache>(*d.spec);
  } catch (const std::exception& e) {
    c.fail("integrity", "load", e.what());
    return;
  }
  // plan_final.txt holds the prefill then the decode plan, each starting "plan ".
  try {
    const std::string text = slurp(d.dir / "plan_final.txt");
    const size_t cut = text.find("\nplan ");
    if (cut == std::string::npos) throw_error<InputError>("plan_final.txt holds one plan, want prefill and decode");
    d.prefill = compiler::parse_plan(text.substr(0, cut + 1), *d.cache);
    d.decode = compiler::parse_plan(text.substr(cut + 1), *d.cache);
  } catch (const std::exception& e) {
    c.fail("plan", "plan_final.txt vs its weights' layouts and the builders", e.what());
  }
  load_source(d, o, c);
}

void audit_plan(const Loaded& d, Checks& c) {
  if (!d.prefill || !d.decode || !d.spec || !d.packed) return;
  size_t designs = 0;
  bool bad = false;
  for (const compiler::Plan* p : {&*d.prefill, &*d.decode}) {
    const std::string v = compiler::verify_plan(*p);
    if (!v.empty()) {
      c.fail("plan", fmt::format("verify_plan ({} S={} P={})", p->model, p->seq, p->past), v);
      bad = true;
    }
    for (const compiler::Step& s : p->steps) {
      if (s.kind != compiler::StepKind::npu) continue;
      for (const compiler::Launch& l : s.launches) {
        try {
          npu::validate(l.op->design, *d.spec);
          ++designs;
        } catch (const std::exception& e) {
          c.fail("plan", fmt::format("device limits of {} (S={})", l.name, p->seq), e.what());
          bad = true;
        }
      }
    }
  }
  try {
    d.packed->check_covers({&*d.prefill, &*d.decode});
  } catch (const std::exception& e) {
    c.fail("plan", "plan layouts vs weights.safetensors", e.what());
    bad = true;
  }
  if (!bad)
    c.ok("plan", "plan_final.txt",
         fmt::format("parsed back with every layout key equal to the builders'; verify_plan clean; {} launches "
                     "re-validated against spec {}; every weight layout present in weights.safetensors",
                     designs, d.spec->name));
}

// One fresh buffer against the deployment's: "" when identical.
std::string buffer_difference(const std::string& key, const std::string& name, const compiler::PackedBuffer& want,
                              const compiler::PackedWeights::Buffers& have) {
  auto it = have.find(name);
  if (it == have.end() || it->second.size() != want.size())
    return fmt::format("{} buffer {}: missing or resized", key, name);
  const auto w = want.bytes(), h = it->second.bytes();
  auto mm = std::mismatch(w.begin(), w.end(), h.begin());
  if (mm.first == w.end()) return {};
  return fmt::format("{} buffer {}: byte {} is {:#04x}, the source packs {:#04x}", key, name, mm.first - w.begin(),
                     static_cast<unsigned>(*mm.second), static_cast<unsigned>(*mm.first));
}

void audit_weights(const Loaded& d, Checks& c) {
  if (!d.prefill || !d.decode || !d.source || !d.packed || !d.config) return;
  std::vector<std::string> differ;
  int64_t bytes = 0;
  size_t keys = 0;
  // Re-packed one key at a time and compared: the evaluator never holds a
  // second packed model in memory.
  try {
    compiler::for_each_packed(
        {&*d.prefill, &*d.decode}, *d.config, *d.source,
        [&](const std::string& key, compiler::PackedWeights::Buffers&& fresh) {
          ++keys;
          if (!d.packed->contains(key)) return;  // audit_plan names a missing layout
          for (const auto& [name, want] : fresh) {
            std::string diff = buffer_difference(key, name, want, d.packed->get(key));
            if (!diff.ends_with("missing or resized")) bytes += static_cast<int64_t>(want.size());
            if (!diff.empty()) differ.push_back(std::move(diff));
          }
          d.packed->release_pages(key);  // compared once: the resident set stays one key
        });
    model::release_mapped_pages(*d.source);
  } catch (const std::exception& e) {
    c.fail("weights", "re-pack from the source", e.what());
    return;
  }
  if (differ.empty()) {
    c.ok("weights", "weights.safetensors",
         fmt::format("{} layouts ({} bytes) identical to the source weights packed under the final plans",
                     keys, bytes));
    return;
  }
  std::string ev = fmt::format("{} buffers differ from the source weights: {}", differ.size(), differ.front());
  for (size_t i = 1; i < std::min<size_t>(differ.size(), 3); ++i) ev += "; " + differ[i];
  c.fail("weights", "weights.safetensors vs source", ev);
}

void audit_totals(const Loaded& d, Checks& c) {
  if (!d.prefill || !d.decode) return;
  auto sum = [](const compiler::Plan& p) {
    return std::accumulate(p.steps.begin(), p.steps.end(), 0.0,
                           [](double a, const compiler::Step& s) { return a + s.seconds(); });
  };
  struct Row {
    const char* file;
    const char* key;
    const compiler::Plan* plan;
  };
  const Row rows[] = {{"phase4.json", "prefill_predicted_seconds", &*d.prefill},
                      {"phase5.json", "decode_predicted_seconds", &*d.decode},
                      {"phase6.json", "prefill_predicted_seconds", &*d.prefill}};
  for (const Row& r : rows) {
    const auto j = read_json(d.dir, r.file, c, "totals");
    if (!j) continue;
    const nlohmann::json det = j->value("details", nlohmann::json::object());
    if (!det.contains(r.key)) {
      c.fail("totals", fmt::format("{} {}", r.file, r.key), "missing");
      continue;
    }
    const double recorded = det[r.key].get<double>(), derived = sum(*r.plan);
    const std::string name = fmt::format("{} {}", r.file, r.key);
    const std::string ev = fmt::format("recorded {:.9g} s, sum of the {} steps ({} NPU dispatches) of the "
                                       "re-derived plan S={} P={}: {:.9g} s (predicted by the timing model)",
                                       recorded, r.plan->steps.size(), r.plan->dispatches(), r.plan->seq,
                                       r.plan->past, derived);
    if (same_figure(recorded, derived)) c.ok("totals", name, ev);
    else c.fail("totals", name, ev);
  }
}

void audit_report(const fs::path& dir, Checks& c) {
  const auto rep = read_json(dir, "report.json", c, "report");
  if (!rep) return;
  int compared = 0;
  for (const auto& p : rep->value("phases", nlohmann::json::array())) {
    const int n = p.value("phase", -1);
    if (n < 0 || n >= 7) continue;  // phase 7 is this evaluation
    const auto file = read_json(dir, fmt::format("phase{}.json", n), c, "report");
    if (!file) continue;
    nlohmann::json a = p, b = *file;
    // A resumed phase is reported as skipped; its file keeps the status it passed with.
    if (a.value("status", "") == "skipped (resumed)" && b.value("status", "") == "passed") a["status"] = "passed";
    const nlohmann::json patch = nlohmann::json::diff(b, a);
    if (patch.empty()) {
      ++compared;
      continue;
    }
    const auto& op = patch.front();
    const nlohmann::json::json_pointer ptr(op.at("path").get<std::string>());
    const std::string fv = b.contains(ptr) ? b.at(ptr).dump() : "absent";
    const std::string rv = a.contains(ptr) ? a.at(ptr).dump() : "absent";
    c.fail("report", fmt::format("report.json phase {}", n),
           fmt::format("disagrees with phase{}.json at {}: report {}, phase file {} ({} differences)", n,
                       ptr.to_string(), rv.substr(0, 80), fv.substr(0, 80), patch.size()));
  }
  if (compared > 0) c.ok("report", "report.json", fmt::format("{} phases identical to their phase files", compared));
}

}  // namespace tessera::pipeline::eval
