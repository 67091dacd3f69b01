#pragma once
// Where a generation's host time went, per kind of launch (the same launch of
// every layer is one kind): `tessera run --profile`. The simulator's wall
// time beside the NPU time the timing model predicts for the same launches,
// so a slow simulation of a fast op (or the reverse) shows.
#include <string>
#include <vector>

#include "tessera/runtime/session.h"

namespace tessera::runtime {

struct OpProfileRow {
  std::string op;              // a launch's name without its layer ("q", "attn"), or the rows below
  double steps_per_token = 0;  // launches of this kind (steps for "dispatch") per decode token
  double predicted_ms = 0;     // NPU (or host model) time per token, as predicted
  double host_ms = 0;          // this machine's wall time per token
};

// Per-kind means over the decode calls (each needs CallTiming::steps, kept
// under SessionOptions::profile), heaviest host time first, then
// "dispatch" (a step's time outside its launches: predicted, the dispatch
// overhead, reconfigurations and relayouts; host, the executor's own work),
// "plan" (lowering or retargeting the decode plan) and "rest" (a call's host
// time outside its steps and its plan: inputs, KV cache, logits). The rows'
// times add up to the mean decode call's. UsageError when there are no
// decode calls or one kept no steps.
std::vector<OpProfileRow> decode_profile(const GenerateResult& r);

// The rows as an aligned text table with a total line.
std::string format_profile(const std::vector<OpProfileRow>& rows);

}  // namespace tessera::runtime
