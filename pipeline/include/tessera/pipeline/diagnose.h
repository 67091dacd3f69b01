#pragma once
// Diagnosers (issue 15): when a gate fails, name the likely cause by testing
// hypotheses on the data, never by reading names.
//
// The failing op is isolated first: its shape, the inputs it read and what it
// wrote (phase 1 hands these over directly; phases 2 and 3 find the first node
// of the run whose NPU output disagrees with the oracle op applied to the NPU's
// own inputs, diagnose_run.cpp). Each diagnoser then re-runs the oracle op with
// its suspected bug applied (a transposed weight, the interleaved RoPE pairing,
// positions off by k, a missing or doubled bias, the other GQA head mapping, a
// softmax without max subtraction, a norm eps x100 or a missing norm weight, a
// KV row written at pos +- k, a value read in the other layout) and keeps the
// hypothesis only when all three hold:
//   - the NPU output fails the op's own phase-1 gate against the correct op,
//   - it passes that same gate (thresholds.h, derived from the op's rounding)
//     against the bugged op,
//   - the bugged op differs from the correct op by more than that gate on
//     these inputs (else the experiment cannot tell them apart).
// A device-limit error is tested by re-building the op with the tile options
// the tile search (kernels/tile_search.h) finds on the same spec.
// No hypothesis reproducing the data gives "unknown", with what was tried.
#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/kernels/op_builder.h"
#include "tessera/model/config.h"
#include "tessera/npu/device_spec.h"

namespace tessera::pipeline {

// One op instance as the NPU ran it.
struct OpCase {
  std::string where;                       // "phase 1 prefill q_rot", "phase 2 node L0.v"
  kernels::OpShape shape;
  std::vector<std::vector<float>> inputs;  // what it read, docs/ops.md order
  std::vector<bool> activation;            // per input: an activation (not a weight / host table)
  std::vector<float> npu;                  // what it wrote; empty when it did not build or run
  std::exception_ptr error;                // the build / run error, if any
  int64_t rows = 1;                        // tokens of the call (S)
  int64_t past = 0;                        // positions before them (P): RoPE's first position
  const model::ModelConfig* config = nullptr;  // RoPE tables of other positions
  // The other weights a weight input could have been bound to (same element
  // count, same layer), by name; empty when unknown (phase 1 runs one layer's
  // op alone).
  std::vector<std::vector<std::pair<std::string, std::vector<float>>>> other_weights;
  npu::DeviceSpec spec;
  // An input that is one row of a longer value (the LM head's last_row view
  // of the final norm): which input, the whole [rows, width] value and the
  // row an honest caller takes (a bucketed prefill's last real token).
  int64_t row_view_input = -1;
  std::vector<float> row_view_source;
  int64_t row_view_row = -1;
};

struct Diagnosis {
  std::string where;
  std::string diagnoser;  // registry name; "unknown" when no hypothesis reproduced the data
  std::string cause;      // one line
  std::string evidence;   // the experiment's figures
  std::vector<std::string> tried;  // hypotheses that did not reproduce it, with their figures
  bool known() const { return diagnoser != "unknown"; }
  // "likely cause: <cause> [<diagnoser>] (<evidence>)"
  std::string line() const;
  nlohmann::json to_json() const;
};

struct DiagnoserInfo {
  std::string name;
  std::vector<std::string> ops;  // ops it has a hypothesis for ("*": every op)
  std::string hypothesis;        // what it re-runs
};
// The registry, one entry per diagnoser (diagnose_registry.cpp).
std::vector<DiagnoserInfo> diagnosers();

// Every diagnoser that applies to c.shape.op (or to c.error) tests its
// hypothesis; the one reproducing the NPU output best wins.
Diagnosis diagnose(const OpCase& c);

}  // namespace tessera::pipeline
