#pragma once
// `tessera deploy`: phases 0 to 7 in order (DESIGN.md "The eight
// phases"), each gated against the FP32 oracle; stops at the first failing
// gate with a report naming the phase, the tap and the metrics.
//
// The deployment directory:
//   manifest.json        per artifact: path, sha256, the phase that wrote it;
//                        per phase: status (passed | failed), inputs' sha256
//   model/               config.json + tokenizer.json (copied from the source)
//   weights.safetensors  packed weights (compiler/packed_weights.h)
//   plan.txt             Plan::dump() of the prefill and decode plans (after
//                        phases 4 / 5: the optimized ones)
//   perf_opt_traj.md     phases 4 / 5: one row per pass tried (predicted
//                        prefill / decode before -> after, bound, gate verdict)
//   plan.md              the plan in words: dispatches per layer, predicted
//                        prefill / decode time, top bounding terms
//   issues.md            what failed and what was done about it
//   report.json          every gate result and predicted time
//   phase<N>.json        one file per phase with its gate table
//   evaluation.json/.md  phase 7: the independent evaluator's verdict (evaluate.h)
//   report.html          the whole report as one self-contained page (report_html.h)
// Resume: a rerun skips a phase whose status is passed and whose artifacts'
// sha256 still match manifest.json; an artifact that does not match (edited,
// truncated) is redone - never trusted - and issues.md says so.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/compiler/packed_weights.h"
#include "tessera/compiler/plan.h"
#include "tessera/npu/device_spec.h"
#include "tessera/pipeline/metrics.h"
#include "tessera/pipeline/phase1.h"
#include "tessera/pipeline/thresholds.h"

namespace tessera::pipeline {

struct DeployOptions {
  std::filesystem::path model_dir;  // a HF model directory, or
  std::string preset;               // a preset with seeded synthetic weights
  int layers = 0;                   // > 0: truncate the model to this many layers
  std::filesystem::path out;
  compiler::PlanStyle style = compiler::PlanStyle::standard;
  int64_t gate_seq = 17;            // prompt length the gates run
  int64_t continuation = 32;        // phase 6 greedy tokens
  uint64_t seed = 1;
  bool resume = true;               // false: redo every phase
  npu::DeviceSpec spec;
  // Progress of long steps: (phase label, done, total).
  std::function<void(const std::string&, size_t, size_t)> progress;
  // The gate prompt as token ids (e.g. a transformers fixture's prompt); empty:
  // gate_seq ids drawn from `seed` over the vocabulary. Its length overrides gate_seq.
  std::vector<int32_t> prompt;
  int last_phase = 7;            // stop after this phase (0 .. 7)
  int64_t eval_tokens = 64;      // phase 7: teacher-forced decode steps (evaluate.h)
  // Test injection (planted bugs): phase 1's builder lookup (empty: the
  // registered builders), and a hook that edits the packed weights after they
  // are packed or loaded, before phases 2, 3 and 6 run on them.
  BuilderLookup builders;
  std::function<void(compiler::PackedWeights&)> tamper_packed;
  // A compiler pass to run with its planted bug in phases 4 / 5 (passes.h):
  // the phase must roll it back and name it.
  std::string plant_pass_bug;
};

// One gated quantity: a tap (phase 2), a layer output (phase 3), logits, a
// continuation token (phase 6).
struct GateCheck {
  std::string name;       // "L0.q_rot", "L3.h_out", "logits", "token 7"
  Metrics metrics;
  Threshold threshold;
  bool passed = false;
  std::string message;    // one line when it failed
};

struct PhaseResult {
  int phase = 0;
  std::string name;       // "oracle", "kernels", "block", "model", "integration"
  std::string status;     // "passed" | "failed" | "skipped (resumed)"
  std::vector<GateCheck> checks;
  double host_seconds = 0;
  nlohmann::json details; // phase-specific figures (predicted times, tokens, margins)
};

struct DeployReport {
  std::string model;
  // The deployed model's weights at 2 bytes each (issue 16's memory budget:
  // peak RSS at most 1.5x this plus a fixed allowance). Not in to_json().
  int64_t weight_bf16_bytes = 0;
  std::vector<PhaseResult> phases;
  bool passed() const;
  // The first failed phase and check, one line: "phase 3 (model): L7.h_out cosine 0.91 < 0.99".
  std::string failure() const;
  nlohmann::json to_json() const;
};

// A planted bug for proving the gates can fail (tests, `tessera deploy
// --plant-bug`): a DeployOptions::tamper_packed hook negating every bf16 of
// each packed weight whose layout key starts with `key_prefix` ("w:L0.v_proj@").
// The hook throws UsageError when no key matches.
std::function<void(compiler::PackedWeights&)> negate_packed_weight(const std::string& key_prefix);

// Runs the phases; writes the directory as it goes (each phase's artifacts
// before its status). Throws only for usage / input errors; a failing gate is
// a report with passed() == false (the CLI maps it to the gate exit code).
DeployReport deploy(const DeployOptions& opts);

}  // namespace tessera::pipeline
