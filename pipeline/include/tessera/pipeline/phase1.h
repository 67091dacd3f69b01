#pragma once
// Phase 1 of the pipeline: every (operator, shape) a model needs, alone on the
// NPU simulator, judged against the FP32 oracle op on the same inputs.
//
// How inputs are found: the oracle runs the model with layers = 1 (per-layer
// shapes are identical across layers) for a prompt of S tokens, recording every
// tap. The op graph (compiler/graph.h) is then evaluated once with the oracle
// ops, taking every value that has a tap from the tap itself (and checking that
// the graph reproduces it: a disagreement is a wiring bug, InternalError).
// Values without a tap (embedding output, pre-bias projections, KV caches)
// come from that evaluation. Each unique (op, dims) then runs once on the NPU
// with the inputs of its first (layer-0) node. The decode pass does the same
// for one token after an S-token prefill (P = S).
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tessera/kernels/op_builder.h"
#include "tessera/model/config.h"
#include "tessera/model/weights.h"
#include "tessera/npu/device_spec.h"
#include "tessera/pipeline/metrics.h"
#include "tessera/pipeline/thresholds.h"

namespace tessera::pipeline {

// Returns the builder for an op or nullptr when none is registered. Tests swap
// in broken variants under the real names to prove the gate can fail.
using BuilderLookup = std::function<const kernels::OpBuilder*(const std::string& op)>;
BuilderLookup registered_builders();  // kernels::op_builder, nullptr for unknown ops

struct KernelResult;

// A kernel that failed its gate or its build, as it ran: what the diagnosers
// (diagnose.h) re-run their hypotheses on.
struct KernelFailure {
  const KernelResult& result;
  const kernels::OpShape& shape;
  const std::vector<std::vector<float>>* inputs;  // nullptr: it never ran
  const std::vector<bool>& activation;            // per input: an activation
  const std::vector<float>* npu;                  // its output; nullptr: none
  std::exception_ptr error;                       // the build / run error
  int64_t rows = 0, past = 0;                     // S and P of the pass
};

struct Phase1Options {
  int64_t seq = 17;        // prefill length S; the decode pass runs at P = S (seq 1: one
                           // decode step at P = 0, no prefill)
  bool prefill = true;
  bool decode = true;
  uint64_t seed = 1;       // prompt tokens (and synthetic weights in run_phase1_preset)
  // The first tokens of the gate's sequence (deploy passes its gate prompt, so
  // phase 1 sees the activations phases 2-6 see); seeded ids fill the rest.
  // Ids must be < vocab (InputError from the oracle otherwise).
  std::vector<int32_t> prompt;
  bool simulate = true;    // false: build + validate + estimate_time only
  BuilderLookup builders;  // empty: registered_builders()
  // Called for every kernel that failed (deploy runs the diagnosers here).
  std::function<void(const KernelFailure&)> on_failure;
};

// not_judged: built + validated + timed without simulation (--no-sim); it is
// never a pass, so a gate cannot pass without having compared numbers.
enum class KernelStatus { pass, fail, no_builder, build_error, run_error, not_judged };
const char* status_name(KernelStatus s);

struct KernelResult {
  std::string phase;              // "prefill" | "decode"
  std::string node;               // representative node, e.g. "q" or "attn_out"
  std::vector<std::string> nodes; // every node sharing the shape ("q", "o")
  std::string shape;              // compiler::shape_text
  KernelStatus status = KernelStatus::fail;
  Metrics metrics;
  Threshold threshold;
  std::vector<std::string> failed;  // metric names over threshold
  double predicted_seconds = 0;     // npu::estimate_time
  std::string bound;
  double utilization = 0;
  int64_t macs = 0;
  // DDR bytes the dispatch moves (in + out): the figure that matters for the
  // memory-bound ops, where MAC utilization says nothing.
  int64_t ddr_bytes = 0;
  double ddr_gb_per_second() const;  // ddr_bytes / predicted_seconds (0 when untimed)
  // The dispatch without its fixed overhead (launches, reconfiguration,
  // fill / drain): what fusion cannot amortize away.
  double launch_seconds = 0;
  double launch_ddr_gb_per_second() const;  // ddr_bytes / launch_seconds
  // Its own roofline on the spec: the larger of MACs at the array's peak and
  // the bytes it must move at the DDR rate (each logical tensor once, or the
  // bytes the design moves when fewer: a gather reads only its rows), against
  // launch_seconds. roofline_bound says which roof ("compute" | "ddr").
  double roofline_seconds = 0;
  std::string roofline_bound;
  double roofline_share() const;  // roofline_seconds / launch_seconds
  double host_seconds = 0;          // build + simulate wall time
  std::string message;              // why it failed, one line
};

struct Phase1Report {
  std::string model;
  std::string spec;
  int64_t seq = 0;
  std::vector<KernelResult> results;
  double host_seconds = 0;

  bool passed() const;
  std::string table() const;  // one row per (phase, kernel, shape), then the failures
  nlohmann::json to_json() const;
};

// With weights for `config` (all layers or just layer 0 + the model tensors).
Phase1Report run_phase1(const model::ModelConfig& config, const model::Weights& weights,
                        const npu::DeviceSpec& spec, const Phase1Options& opts = {});
// A model directory (real weights).
Phase1Report run_phase1_dir(const std::filesystem::path& dir, const npu::DeviceSpec& spec,
                            const Phase1Options& opts = {});
// A preset with seeded synthetic weights (one layer, written to a temp dir).
Phase1Report run_phase1_preset(const std::string& preset, const npu::DeviceSpec& spec,
                               const Phase1Options& opts = {});

}  // namespace tessera::pipeline
