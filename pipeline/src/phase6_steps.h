#pragma once
// Phase 6's local gate of every decode step (issue 12). The session's decode
// calls feed the NPU host values only the runtime computes (the token's
// position and RoPE table, the KV cache it kept from earlier calls), so a
// runtime bug there is invisible to phases 1-3 and, end to end, shows up only
// as a drifting logits row. Each step is therefore gated like phase 2's ops:
// every node of the step's plan against the oracle op on the NPU's own
// activation inputs (local_gate.h), the reference taking the host values an
// honest caller supplies at the oracle's position: the step's token, the RoPE
// table of position P = prompt + step, and as KV cache the rows the NPU
// itself wrote at earlier calls (recorded here call by call, not the
// session's copy). A failure then names the step, the layer and the op: a
// wrong position at the RoPE ops, a cache row the session kept wrong at the
// step's kv_append (its old rows differ from what was written), a new row
// written at the wrong place at kv_append's row P, a wrong attention read at
// attention_decode with kv_append passing. The first failing step is
// diagnosed on its own values (diagnose_run), RoPE hypotheses as offsets
// from the oracle's position.
#include <optional>
#include <vector>

#include "deploy_internal.h"
#include "tessera/pipeline/diagnose.h"
#include "tessera/pipeline/local_gate.h"
#include "tessera/runtime/session.h"

namespace tessera::pipeline::detail {

class DecodeStepGate {
 public:
  // Records the prompt's rows (the first `prompt_rows` of each layer's K / V
  // cache value the session's prefill kept: what the NPU wrote).
  DecodeStepGate(Context& ctx, const runtime::Session& prefilled, int64_t prompt_rows);
  // Gates the session's last call as decode step `step` of `token`: appends
  // each failing check to r.checks ("decode step 2 local L1.k_cache",
  // "decode step 1 position"), diagnoses the first failing step, then records
  // the K / V row the call wrote.
  void check(const runtime::Session& s, size_t step, int32_t token, PhaseResult& r);
  int64_t passed() const { return passed_; }
  int64_t failed() const { return failed_; }
  const std::optional<Diagnosis>& diagnosis() const { return diagnosis_; }

 private:
  runtime::Values step_inputs(int32_t token, int64_t position, int64_t rows) const;
  void record(const runtime::Values& npu, int64_t row);

  Context& ctx_;
  int64_t prompt_;
  std::vector<std::vector<float>> k_, v_;  // per layer: [rows written so far, kv_dim]
  WeightStore weights_;
  int64_t passed_ = 0, failed_ = 0;
  std::optional<Diagnosis> diagnosis_;
};

}  // namespace tessera::pipeline::detail
