#pragma once
// Mutation testing (issue 12): named, subtle planted bugs that every layer can
// consult, so the gates can be shown to catch numeric bugs that are smaller
// than the structural ones (a dropped key, a wrong bias). A mutant is off
// unless selected by the environment variable TESSERA_MUTANT=NAME (read once)
// or by set_active_mutant() (`tessera deploy --plant-bug mutant:NAME`). The
// hook at a mutation site is one cheap line: a compare of a cached enum.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/core/bf16.h"

namespace tessera {

enum class Mutant : uint8_t {
  none,
  // kernels/src (tile kernels)
  linear_truncate,         // GEMM/GEMV output rounded toward zero instead of RNE
  gemv_bf16_accum,         // decode GEMV accumulates in bf16 instead of fp32
  silu_slope_2pct,         // SiLU slope x1.02
  rmsnorm_eps_x100,        // RMSNorm epsilon 100x too large
  head_rmsnorm_eps_x100,   // q/k head RMSNorm epsilon 100x too large
  rmsnorm_mean_n_minus_1,  // RMS over n - 1 instead of n (both norms)
  attn_mask_last_key,      // every query row misses its last visible key (when it has > 1)
  attn_sum_skip_last,      // the softmax sum of a key block misses its last key
  attn_merge_weight,       // merging partial attention states weighs the incoming output (not its sum) x(1 + 2^-7)
  residual_last_truncate,  // residual add: the last element truncated instead of RNE
  bias_scaled,             // bias added x(1 + 2^-6)
  rope_truncate,           // RoPE output truncated instead of RNE
  // kernels/src/builders (design builders)
  embed_row_shift,         // embedding design: token 0 of a call gathers row id + 1
  softmax_scale_prefill,   // prefill attention softmax scale x1.01
  softmax_scale_decode,    // decode attention softmax scale x1.01
  // runtime/src/executor.cpp, host_ops.cpp
  exec_swap_gate_up,       // executor binds L1's up weights to gate and gate to up
  exec_kv_write_prev,      // host kv_append of layer L1 writes its rows one position early
  host_embed_row_shift,    // host embedding: row 0 of a call gathers token id + 1
  // runtime/src/session.cpp
  session_stuck_pos,       // the first decode step does not advance the position
  session_kv_stale_row,    // decode: the last layer caches the previous row again
  session_rope_truncate,   // the session's RoPE table truncated to bf16 instead of RNE
  // Kept aside (MutantInfo::aside): written after the gates of issue 12 were
  // tuned, never used to tune them; bench/mutation.sh -a scores them apart.
  gemm_drop_last_k,              // GEMM tile: each K block skips its last k
  rmsnorm_weight_last_one,       // RMSNorm: the last element of a row ignores its weight
  silu_exp_truncate,             // SiLU: the bf16 exp result truncated instead of RNE
  rope_sin_sign_last_pair,       // RoPE: the lowest-frequency pair rotates the other way
  attn_sum_bf16,                 // attention: the softmax running sum kept in bf16
  exec_last_row_prev,            // executor: a caller-chosen last row takes the row before it
  session_decode_rope_next_pos,  // session: a decode step's RoPE at position P + 1
};

struct MutantInfo {
  Mutant id;
  const char* name;
  const char* layer;  // kernels, builders, executor, session
  const char* what;
  bool aside = false;  // an independent mutant (see the enum), not the harness's list
};

const std::vector<MutantInfo>& mutants();
// UsageError naming the known mutants when `name` is none of them.
Mutant mutant_by_name(const std::string& name);
const char* mutant_name(Mutant m);

namespace detail {
extern Mutant g_active_mutant;  // initialized from TESSERA_MUTANT before main
}

// The mutant in force (Mutant::none normally).
inline Mutant active_mutant() { return detail::g_active_mutant; }
inline bool mutant_on(Mutant m) { return detail::g_active_mutant == m; }
void set_active_mutant(Mutant m);
// UsageError when TESSERA_MUTANT names no mutant (it is read before main).
void check_mutant_env();

// The truncating (round toward zero) conversion a mutant uses instead of RNE.
inline bf16 f32_to_bf16_truncate(float f) {
  return bf16{static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16)};
}
inline float truncate_bf16(float f) { return bf16_to_f32(f32_to_bf16_truncate(f)); }

}  // namespace tessera
