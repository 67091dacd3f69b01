#include "tessera/core/mutants.h"
#include "tessera/kernels/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "scratch.h"
#include "tessera/kernels/nonlinear.h"
#include "vec_ops.h"

namespace tessera::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Per query row and block: max and sum lane folds, the rescale exp.
constexpr int64_t kFlashRowCycles = 24;

template <class F>  // float or const float
struct StateView {
  F* m;
  F* l;
  F* o;
};

template <class F>
StateView<F> view(F* state, int64_t rows) {
  return {state, state + rows, state + 2 * rows};
}

// Keys of the block query position p may see.
int64_t visible_keys(const AttnBlock& b, int64_t p) {
  if (!b.causal) return b.kv_rows;
  return std::clamp<int64_t>(p - b.k_pos0 + 1, 0, b.kv_rows);
}

// Keys query row `pos` of the block attends to (0: the block is its future).
int64_t row_keys(const AttnBlock& b, int64_t pos) {
  int64_t n = visible_keys(b, b.q_pos0 + pos);
  if (mutant_on(Mutant::attn_mask_last_key) && n > 1 && b.q_pos0 + pos + 1 == b.k_pos0 + n) --n;
  return n;
}

// One query row against `n` keys: scores and the online-softmax update of
// (m, l), the running o rescaled; leaves the weights p_j in s (bf16 values).
void softmax_row(const float* qf, const float* kf, int64_t n, const AttnBlock& b, float* s,
                 float& m, float& l, float* o) {
  const int64_t d = b.head_dim;
  float mx = kNegInf;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = dot(qf, kf + j * d, d) * b.scale;  // stays in the fp32 accumulator
    mx = std::max(mx, s[j]);
  }
  const float m_new = std::max(m, mx);
  const float alpha = exp_tile(m - m_new);  // 0 on the first block (m = -inf)
  float psum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = exp_tile(s[j] - m_new);  // fp32 subtract, then the bf16 operand of exp
    psum += s[j];
  }
  if (mutant_on(Mutant::attn_sum_skip_last) && n > 1) psum -= s[n - 1];
  l = l * alpha + psum;
  if (mutant_on(Mutant::attn_sum_bf16)) l = round_bf16(l);
  m = m_new;
  for (int64_t i = 0; i < d; ++i) o[i] *= alpha;
}

// o += sum_j p_j v_j over the row's n keys, in key order.
void pv_row(const float* p, const float* vf, int64_t n, int64_t d, float* o) {
  for (int64_t j = 0; j < n; ++j) axpy(p[j], vf + j * d, o, d);
}

}  // namespace

void attn_state_init(float* state, int64_t rows, int64_t head_dim) {
  auto st = view(state, rows);
  std::fill(st.m, st.m + rows, kNegInf);
  std::fill(st.l, st.l + rows, 0.0f);
  std::fill(st.o, st.o + rows * head_dim, 0.0f);
}

void attn_block(const bf16* q, const bf16* k, const bf16* v, float* state, const AttnBlock& b) {
  const int64_t d = b.head_dim, rows = b.q_rows * b.group;
  float* kf = scratch_f32(ScratchSlot::attn_k, b.kv_rows * d);
  float* vf = scratch_f32(ScratchSlot::attn_v, b.kv_rows * d);
  float* s = scratch_f32(ScratchSlot::attn_s, b.kv_rows + d);
  float* qf = s + b.kv_rows;
  bf16_to_f32_n(k, kf, b.kv_rows * d);
  bf16_to_f32_n(v, vf, b.kv_rows * d);
  auto st = view(state, rows);
  for (int64_t pos = 0; pos < b.q_rows; ++pos) {
    const int64_t n = row_keys(b, pos);
    if (n == 0) continue;  // the whole block lies in this row's future
    for (int64_t g = 0; g < b.group; ++g) {
      const int64_t r = pos * b.group + g;
      bf16_to_f32_n(q + r * d, qf, d);
      softmax_row(qf, kf, n, b, s, st.m[r], st.l[r], st.o + r * d);
      pv_row(s, vf, n, d, st.o + r * d);
    }
  }
}

void attn_scores(const bf16* q, const bf16* k, bf16* p, float* state, const AttnBlock& b) {
  const int64_t d = b.head_dim, rows = b.q_rows * b.group;
  float* kf = scratch_f32(ScratchSlot::attn_k, b.kv_rows * d);
  float* s = scratch_f32(ScratchSlot::attn_s, b.kv_rows + d);
  float* qf = s + b.kv_rows;
  bf16_to_f32_n(k, kf, b.kv_rows * d);
  auto st = view(state, rows);
  for (int64_t pos = 0; pos < b.q_rows; ++pos) {
    const int64_t n = row_keys(b, pos);
    if (n == 0) continue;
    for (int64_t g = 0; g < b.group; ++g) {
      const int64_t r = pos * b.group + g;
      bf16_to_f32_n(q + r * d, qf, d);
      softmax_row(qf, kf, n, b, s, st.m[r], st.l[r], st.o + r * d);
      // Exact: every p_j is an exp_tile result, already a bf16 value.
      for (int64_t j = 0; j < n; ++j) p[r * b.kv_rows + j] = f32_to_bf16(s[j]);
    }
  }
}

void attn_pv(const bf16* p, const bf16* v, float* state, const AttnBlock& b) {
  const int64_t d = b.head_dim, rows = b.q_rows * b.group;
  float* vf = scratch_f32(ScratchSlot::attn_v, b.kv_rows * d);
  float* s = scratch_f32(ScratchSlot::attn_s, b.kv_rows + d);
  bf16_to_f32_n(v, vf, b.kv_rows * d);
  auto st = view(state, rows);
  for (int64_t pos = 0; pos < b.q_rows; ++pos) {
    const int64_t n = row_keys(b, pos);
    if (n == 0) continue;
    for (int64_t g = 0; g < b.group; ++g) {
      const int64_t r = pos * b.group + g;
      bf16_to_f32_n(p + r * b.kv_rows, s, n);
      pv_row(s, vf, n, d, st.o + r * d);
    }
  }
}

void attn_merge(float* a, const float* b, int64_t rows, int64_t head_dim) {
  auto sa = view(a, rows);
  auto sb = view(b, rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float m = std::max(sa.m[r], sb.m[r]);
    if (m == kNegInf) continue;  // neither side saw a key yet
    const float fa = exp_tile(sa.m[r] - m), fb = exp_tile(sb.m[r] - m);
    sa.m[r] = m;
    sa.l[r] = sa.l[r] * fa + sb.l[r] * fb;
    float* oa = sa.o + r * head_dim;
    const float* ob = sb.o + r * head_dim;
    const float fo = fb * (mutant_on(Mutant::attn_merge_weight) ? 1.0078125f : 1.0f);
    for (int64_t i = 0; i < head_dim; ++i) oa[i] = oa[i] * fa + ob[i] * fo;
  }
}

void attn_finalize(const float* state, bf16* out, int64_t rows, int64_t head_dim) {
  auto st = view(state, rows);
  for (int64_t r = 0; r < rows; ++r) {
    if (!(st.l[r] > 0.0f)) {
      throw_error<KernelNumericError>(
          "attn_finalize: row {} has softmax sum {} (it saw no key: check causal offsets and "
          "KV blocking)", r, st.l[r]);
    }
    const float inv = recip_tile(st.l[r]);
    const float* o = st.o + r * head_dim;
    bf16* dst = out + r * head_dim;
    for (int64_t i = 0; i < head_dim; ++i) dst[i] = f32_to_bf16(o[i] * inv);
  }
}

AttnBlock attn_block_params(const npu::KernelParams& p, const char* kernel, bool causal_default) {
  AttnBlock b;
  b.q_rows = param_int_or(p, "q_rows", 1, kernel);
  b.group = param_in(p, "group", 1, 64, kernel);
  b.kv_rows = param_in(p, "kv_rows", 1, 1 << 16, kernel);
  b.head_dim = param_in(p, "head_dim", 2, 1024, kernel);
  b.q_pos0 = param_int_or(p, "q_pos0", 0, kernel);
  b.k_pos0 = param_int_or(p, "k_pos0", 0, kernel);
  b.causal = param_int_or(p, "causal", causal_default ? 1 : 0, kernel) != 0;
  b.scale = static_cast<float>(
      param_float_or(p, "scale", 1.0 / std::sqrt(static_cast<double>(b.head_dim)), kernel));
  if (b.q_rows < 1 || b.q_rows > (1 << 16) || b.q_pos0 < 0 || b.k_pos0 < 0) {
    throw_error<KernelArgError>("kernel {}: q_rows {} / q_pos0 {} / k_pos0 {} out of range",
                                kernel, b.q_rows, b.q_pos0, b.k_pos0);
  }
  return b;
}

int64_t attn_block_l1_bytes(const AttnBlock& b) {
  const int64_t rows = b.q_rows * b.group;
  return 2 * (rows * b.head_dim + 2 * b.kv_rows * b.head_dim) +
         4 * attn_state_floats(rows, b.head_dim);
}

namespace {

constexpr const char* kBlock = "flash_attn";
constexpr const char* kScores = "attn_scores";
constexpr const char* kPv = "attn_pv";

void run_block(const npu::KernelInvocation& inv) {
  AttnBlock b = attn_block_params(*inv.params, kBlock, true);
  const int64_t rows = b.q_rows * b.group;
  attn_block(arg_ptr<const bf16>(inv, 0, rows * b.head_dim, kBlock, "q"),
             arg_ptr<const bf16>(inv, 1, b.kv_rows * b.head_dim, kBlock, "k"),
             arg_ptr<const bf16>(inv, 2, b.kv_rows * b.head_dim, kBlock, "v"),
             arg_ptr<float>(inv, 3, attn_state_floats(rows, b.head_dim), kBlock, "state"), b);
}

void run_scores(const npu::KernelInvocation& inv) {
  AttnBlock b = attn_block_params(*inv.params, kScores, true);
  const int64_t rows = b.q_rows * b.group;
  attn_scores(arg_ptr<const bf16>(inv, 0, rows * b.head_dim, kScores, "q"),
              arg_ptr<const bf16>(inv, 1, b.kv_rows * b.head_dim, kScores, "k"),
              arg_ptr<bf16>(inv, 2, rows * b.kv_rows, kScores, "p"),
              arg_ptr<float>(inv, 3, attn_state_floats(rows, b.head_dim), kScores, "state"), b);
}

void run_pv(const npu::KernelInvocation& inv) {
  AttnBlock b = attn_block_params(*inv.params, kPv, true);
  const int64_t rows = b.q_rows * b.group;
  attn_pv(arg_ptr<const bf16>(inv, 0, rows * b.kv_rows, kPv, "p"),
          arg_ptr<const bf16>(inv, 1, b.kv_rows * b.head_dim, kPv, "v"),
          arg_ptr<float>(inv, 2, attn_state_floats(rows, b.head_dim), kPv, "state"), b);
}

// Matrix unit for q k^T and p v over the whole block (a diagonal block pays in
// full: the mmul granules do not skip masked entries), vector unit for the
// online softmax (6 ops per score vector) and the o rescale (1 op per vector).
// attn_scores + attn_pv cost what flash_attn does, plus one more call.
Cost scores_cycles(const AttnBlock& b, const npu::DeviceSpec& s) {
  const int64_t rows = b.q_rows * b.group;
  return mmul_cycles(rows, b.head_dim, b.kv_rows, s) +
         static_cast<double>(rows) * (vector_cycles(b.kv_rows, kSoftmaxOps, s) +
                                      vector_cycles(b.head_dim, 1, s) + fixed_cycles(kFlashRowCycles));
}
Cost pv_cycles(const AttnBlock& b, const npu::DeviceSpec& s) {
  return mmul_cycles(b.q_rows * b.group, b.kv_rows, b.head_dim, s);
}
Cost block_cycles(const npu::KernelParams& p, const npu::DeviceSpec& s) {
  const AttnBlock b = attn_block_params(p, kBlock, true);
  return scores_cycles(b, s) + pv_cycles(b, s);
}

// One matmul's MACs (q k^T or p v) of a block.
int64_t half_macs(const npu::KernelParams& p, const char* kernel) {
  const AttnBlock b = attn_block_params(p, kernel, true);
  return b.q_rows * b.group * b.kv_rows * b.head_dim;
}

// attn_scores: q, k, p (bf16 rows x kv_rows) and state; attn_pv: p, v, state.
int64_t scores_l1(const npu::KernelParams& p) {
  const AttnBlock b = attn_block_params(p, kScores, true);
  const int64_t rows = b.q_rows * b.group;
  return 2 * (rows * b.head_dim + b.kv_rows * b.head_dim + rows * b.kv_rows) +
         4 * attn_state_floats(rows, b.head_dim);
}
int64_t pv_l1(const npu::KernelParams& p) {
  const AttnBlock b = attn_block_params(p, kPv, true);
  const int64_t rows = b.q_rows * b.group;
  return 2 * (rows * b.kv_rows + b.kv_rows * b.head_dim) + 4 * attn_state_floats(rows, b.head_dim);
}

// attn_copy (src, dst) [elems]: a bf16 object copied into a local buffer (the
// split cascade's q capture, mlir-air's copy_tile).
TileKernel copy_kernel() {
  constexpr const char* kCopy = "attn_copy";
  auto elems = [](const npu::KernelParams& p) { return param_in(p, "elems", 1, 1 << 20, kCopy); };
  return make_tile_kernel(
      kCopy,
      [elems](const npu::KernelInvocation& inv) {
        const int64_t n = elems(*inv.params);
        std::copy_n(arg_ptr<const bf16>(inv, 0, n, kCopy, "src"), n,
                    arg_ptr<bf16>(inv, 1, n, kCopy, "dst"));
      },
      [elems](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        return copy_cycles(2 * elems(p), s);
      },
      [elems](const npu::KernelParams& p) { return 4 * elems(p); });
}

struct StateDims {
  int64_t rows, head_dim;
};

StateDims state_dims(const npu::KernelParams& p, const char* kernel) {
  return {param_in(p, "rows", 1, 1 << 20, kernel), param_in(p, "head_dim", 2, 1024, kernel)};
}

// The state kernels' replay entries (npu::KernelDef::replay): their dims
// bound once per instruction instead of two params looked up by name per
// call. A SmolLM2 decode token makes about 4 000 of these calls (an
// attn_init per tile, a merge per partial state), each a few hundred floats.
const StateDims& bound_dims(const npu::KernelInvocation& inv) { return *static_cast<const StateDims*>(inv.bound); }
void replay_init(const npu::KernelInvocation& inv) {
  attn_state_init(reinterpret_cast<float*>(inv.args[0].data()), bound_dims(inv).rows, bound_dims(inv).head_dim);
}
void replay_merge(const npu::KernelInvocation& inv) {
  attn_merge(reinterpret_cast<float*>(inv.args[0].data()), reinterpret_cast<const float*>(inv.args[1].data()),
             bound_dims(inv).rows, bound_dims(inv).head_dim);
}
void replay_finalize(const npu::KernelInvocation& inv) {
  attn_finalize(reinterpret_cast<const float*>(inv.args[0].data()), reinterpret_cast<bf16*>(inv.args[1].data()),
                bound_dims(inv).rows, bound_dims(inv).head_dim);
}
TileKernel with_replay(TileKernel k, void (*replay)(const npu::KernelInvocation&)) {
  k.def.bind = [name = k.def.name](const npu::KernelParams& p) -> std::shared_ptr<const void> {
    return std::make_shared<const StateDims>(state_dims(p, name.c_str()));
  };
  k.def.replay = replay;
  return k;
}

// attn_init / attn_merge / attn_finalize: `ops` vector ops per o vector plus a
// per-row cost, over `objects` state-sized args.
TileKernel state_kernel(const char* name, RunFn run, int64_t ops, int64_t row_cycles,
                        int64_t l1_per_state_float) {
  return make_tile_kernel(
      name, std::move(run),
      [=](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        auto [rows, d] = state_dims(p, name);
        return static_cast<double>(rows) * (vector_cycles(d, ops, s) + fixed_cycles(row_cycles));
      },
      [=](const npu::KernelParams& p) {
        auto [rows, d] = state_dims(p, name);
        return l1_per_state_float * attn_state_floats(rows, d);
      });
}

}  // namespace

std::vector<TileKernel> flash_attention_kernels() {
  std::vector<TileKernel> v;
  v.push_back(make_tile_kernel(
      kBlock, run_block, block_cycles,
      [](const npu::KernelParams& p) { return attn_block_l1_bytes(attn_block_params(p, kBlock, true)); },
      [](const npu::KernelParams& p) { return 2 * half_macs(p, kBlock); }));
  v.push_back(make_tile_kernel(
      kScores, run_scores,
      [](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        return scores_cycles(attn_block_params(p, kScores, true), s);
      },
      scores_l1, [](const npu::KernelParams& p) { return half_macs(p, kScores); }));
  v.push_back(make_tile_kernel(
      kPv, run_pv,
      [](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        return pv_cycles(attn_block_params(p, kPv, true), s);
      },
      pv_l1, [](const npu::KernelParams& p) { return half_macs(p, kPv); }));
  v.push_back(copy_kernel());
  v.push_back(with_replay(state_kernel(
      "attn_init",
      [](const npu::KernelInvocation& inv) {
        auto [rows, d] = state_dims(*inv.params, "attn_init");
        attn_state_init(arg_ptr<float>(inv, 0, attn_state_floats(rows, d), "attn_init", "state"),
                        rows, d);
      },
      1, 2, 4), replay_init));
  v.push_back(with_replay(state_kernel(
      "attn_merge",
      [](const npu::KernelInvocation& inv) {
        auto [rows, d] = state_dims(*inv.params, "attn_merge");
        int64_t n = attn_state_floats(rows, d);
        attn_merge(arg_ptr<float>(inv, 0, n, "attn_merge", "state_a"),
                   arg_ptr<const float>(inv, 1, n, "attn_merge", "state_b"), rows, d);
      },
      2, kFlashRowCycles, 8), replay_merge));
  // l1: the fp32 state plus a bf16 out of rows * d (< half a state float each).
  v.push_back(with_replay(state_kernel(
      "attn_finalize",
      [](const npu::KernelInvocation& inv) {
        auto [rows, d] = state_dims(*inv.params, "attn_finalize");
        attn_finalize(arg_ptr<const float>(inv, 0, attn_state_floats(rows, d), "attn_finalize",
                                           "state"),
                      arg_ptr<bf16>(inv, 1, rows * d, "attn_finalize", "out"), rows, d);
      },
      1, 8, 6), replay_finalize));
  return v;
}

}  // namespace tessera::kernels
