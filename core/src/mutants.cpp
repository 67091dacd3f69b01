#include "tessera/core/mutants.h"

#include <cstdlib>

#include "tessera/core/error.h"

namespace tessera {

const std::vector<MutantInfo>& mutants() {
  static const std::vector<MutantInfo> all = {
      {Mutant::linear_truncate, "linear_truncate", "kernels", "GEMM/GEMV output truncated instead of RNE"},
      {Mutant::gemv_bf16_accum, "gemv_bf16_accum", "kernels", "decode GEMV accumulates in bf16"},
      {Mutant::silu_slope_2pct, "silu_slope_2pct", "kernels", "SiLU slope x1.02"},
      {Mutant::rmsnorm_eps_x100, "rmsnorm_eps_x100", "kernels", "RMSNorm epsilon x100"},
      {Mutant::head_rmsnorm_eps_x100, "head_rmsnorm_eps_x100", "kernels", "q/k head RMSNorm epsilon x100"},
      {Mutant::rmsnorm_mean_n_minus_1, "rmsnorm_mean_n_minus_1", "kernels", "mean square over n - 1"},
      {Mutant::attn_mask_last_key, "attn_mask_last_key", "kernels", "each query misses its last visible key"},
      {Mutant::attn_sum_skip_last, "attn_sum_skip_last", "kernels", "softmax sum of a key block misses its last key"},
      {Mutant::attn_merge_weight, "attn_merge_weight", "kernels", "merged attention partial's output (not its sum) weighed x(1 + 2^-7)"},
      {Mutant::residual_last_truncate, "residual_last_truncate", "kernels", "residual add truncates its last element"},
      {Mutant::bias_scaled, "bias_scaled", "kernels", "bias added x(1 + 2^-6)"},
      {Mutant::rope_truncate, "rope_truncate", "kernels", "RoPE output truncated instead of RNE"},
      {Mutant::embed_row_shift, "embed_row_shift", "builders", "embedding design: token 0 gathers row id + 1"},
      {Mutant::softmax_scale_prefill, "softmax_scale_prefill", "builders", "prefill softmax scale x1.01"},
      {Mutant::softmax_scale_decode, "softmax_scale_decode", "builders", "decode softmax scale x1.01"},
      {Mutant::exec_swap_gate_up, "exec_swap_gate_up", "executor", "L1 gate and up weight buffers swapped"},
      {Mutant::exec_kv_write_prev, "exec_kv_write_prev", "executor", "L1 kv_append writes one row early (host step or NPU design)"},
      {Mutant::host_embed_row_shift, "host_embed_row_shift", "executor", "host embedding row 0 gathers id + 1"},
      {Mutant::session_stuck_pos, "session_stuck_pos", "session", "first decode step does not advance"},
      {Mutant::session_kv_stale_row, "session_kv_stale_row", "session", "last layer caches the previous row on decode"},
      {Mutant::session_rope_truncate, "session_rope_truncate", "session", "RoPE table truncated to bf16"},
      {Mutant::gemm_drop_last_k, "gemm_drop_last_k", "kernels", "GEMM K block skips its last k", true},
      {Mutant::rmsnorm_weight_last_one, "rmsnorm_weight_last_one", "kernels", "RMSNorm last element unweighted", true},
      {Mutant::silu_exp_truncate, "silu_exp_truncate", "kernels", "SiLU bf16 exp truncated", true},
      {Mutant::rope_sin_sign_last_pair, "rope_sin_sign_last_pair", "kernels", "RoPE lowest-frequency pair rotates backwards", true},
      {Mutant::attn_sum_bf16, "attn_sum_bf16", "kernels", "softmax running sum in bf16", true},
      {Mutant::exec_last_row_prev, "exec_last_row_prev", "executor", "caller-chosen last row off by one", true},
      {Mutant::session_decode_rope_next_pos, "session_decode_rope_next_pos", "session", "decode RoPE at P + 1", true},
  };
  return all;
}

Mutant mutant_by_name(const std::string& name) {
  std::string known;
  for (const MutantInfo& m : mutants()) {
    if (name == m.name) return m.id;
    known += known.empty() ? m.name : std::string(", ") + m.name;
  }
  throw_error<UsageError>("unknown mutant '{}' (known: {})", name, known);
}

const char* mutant_name(Mutant m) {
  for (const MutantInfo& i : mutants())
    if (i.id == m) return i.name;
  return "none";
}

void set_active_mutant(Mutant m) { detail::g_active_mutant = m; }

namespace detail {
namespace {
// Read before main: a name that is no mutant cannot throw here, so it is kept
// and reported by check_mutant_env() (deploy calls it first).
std::string g_bad_env;
Mutant from_env() {
  const char* v = std::getenv("TESSERA_MUTANT");
  if (v == nullptr || *v == '\0') return Mutant::none;
  for (const MutantInfo& m : mutants())
    if (std::string(v) == m.name) return m.id;
  g_bad_env = v;
  return Mutant::none;
}
}  // namespace
Mutant g_active_mutant = from_env();
}  // namespace detail

void check_mutant_env() {
  if (!detail::g_bad_env.empty()) mutant_by_name(detail::g_bad_env);
}

}  // namespace tessera
