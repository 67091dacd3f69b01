#pragma once
// Phase 7: the independent evaluator (`tessera evaluate DIR`, and the last
// phase of `tessera deploy`). It trusts nothing the earlier phases wrote: it
// re-derives every verdict from the raw artifacts with its own code path
// (evaluate*.cpp shares no gate code with phase*.cpp beyond the canonical
// threshold tables):
//   integrity   manifest seal, every artifact's sha256, the verdict chain
//   weights     weights.safetensors re-packed from the source weights under
//               the final plans, byte for byte (a forged byte with a
//               recomputed manifest entry is caught here)
//   plan        plan_final.txt parsed back (designs rebuilt, layout keys
//               checked against the builders), verify_plan, every design
//               re-validated against spec.json, and covered by the weights
//   totals      the predicted totals phases 4 / 5 recorded against the sum of
//               the re-derived plans' dispatches
//   thresholds  every threshold in phase<N>.json against the canonical tables
//               (thresholds.h, deploy_thresholds.h); a looser one is a finding,
//               and so is a check marked passed that the canonical one fails
//   report      report.json's phases against phase<N>.json
//   numerics    the NPU (runtime::Session) against the FP32 oracle on fresh
//               prompts (1 token, odd, one past a pow2 bucket, the longest
//               allowed), teacher-forced decode over a reference text
//   determinism two sessions, one prompt: identical tokens and predicted times
// Every limit of a measure is derived before the run from the threshold
// tables (see evaluate_measure.cpp), never from the measured error.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::pipeline {

struct EvaluateOptions {
  std::filesystem::path dir;
  std::filesystem::path source;  // source model directory; empty: phase0.json's
  int64_t decode_tokens = 64;    // teacher-forced decode steps over the reference text
  // Cap of the "longest prompt the context allows": the simulator runs every
  // tile, so a 2048-token prefill of even the tiny model takes minutes.
  int64_t max_prompt = 64;
  // Phase 7 of a running deploy: the manifest's own phase 7 entry is ignored
  // (it is "running"), as it is in a standalone run (evaluation.* is rewritten).
  std::function<void(const std::string&, size_t, size_t)> progress;
};

// One finding or one passed audit.
struct EvalCheck {
  std::string area;      // integrity | weights | plan | totals | thresholds | report | numerics | determinism
  std::string name;      // what was checked: "phase2.json L0.q min_cosine", "top-1 agreement (17 tokens)"
  std::string severity;  // "ok" | "warning" | "fail"
  std::string evidence;  // the figures that decided it
};

struct Evaluation {
  std::string model;
  std::vector<EvalCheck> checks;
  nlohmann::json measures = nlohmann::json::object();  // figures with their limits and derivations
  // "PASS" | "PASS-with-warnings" | "FAIL", from the checks' severities.
  std::string verdict() const;
  nlohmann::json to_json() const;
  std::string markdown() const;
};

// Runs every audit and measure. Throws only for a directory that is not a
// deployment at all (no manifest.json: InputError); everything else that is
// wrong is a failed check.
Evaluation evaluate(const EvaluateOptions& opts);

// Writes evaluation.json and evaluation.md into `dir`.
void write_evaluation(const std::filesystem::path& dir, const Evaluation& e);

}  // namespace tessera::pipeline
