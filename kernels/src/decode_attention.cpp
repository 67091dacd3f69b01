#include "tessera/kernels/decode_attention.h"

#include "tessera/kernels/flash_attention.h"

namespace tessera::kernels {
namespace {

constexpr const char* kDecodeAttnName = "decode_attn";
constexpr int64_t kDecodeRowCycles = 24;  // per head: max / sum folds, rescale exp

AttnBlock decode_params(const npu::KernelParams& p) {
  AttnBlock b = attn_block_params(p, kDecodeAttnName, false);
  if (b.q_rows != 1 || b.causal) {
    throw_error<KernelArgError>("kernel {}: one query token without causal mask (got q_rows {}, "
                                "causal {}); use flash_attn for more", kDecodeAttnName, b.q_rows, b.causal);
  }
  return b;
}

void run_decode_attn(const npu::KernelInvocation& inv) {
  AttnBlock b = decode_params(*inv.params);
  attn_block(arg_ptr<const bf16>(inv, 0, b.group * b.head_dim, kDecodeAttnName, "q"),
             arg_ptr<const bf16>(inv, 1, b.kv_rows * b.head_dim, kDecodeAttnName, "k"),
             arg_ptr<const bf16>(inv, 2, b.kv_rows * b.head_dim, kDecodeAttnName, "v"),
             arg_ptr<float>(inv, 3, attn_state_floats(b.group, b.head_dim), kDecodeAttnName, "state"), b);
}

// Vector unit: q.k and p.v as lane-wide MACs over group * kv_rows * head_dim
// each, softmax 6 ops per score vector, per-head folds.
Cost cycles(const npu::KernelParams& p, const npu::DeviceSpec& s) {
  AttnBlock b = decode_params(p);
  const int64_t work = b.group * b.kv_rows;
  return 2.0 * vector_cycles(work * b.head_dim, 1, s) + vector_cycles(work, kSoftmaxOps, s) +
         fixed_cycles(b.group * kDecodeRowCycles);
}

}  // namespace

std::vector<TileKernel> decode_attention_kernels() {
  TileKernel k = make_tile_kernel(
      kDecodeAttnName, run_decode_attn, cycles,
      [](const npu::KernelParams& p) { return attn_block_l1_bytes(decode_params(p)); },
      [](const npu::KernelParams& p) {
        AttnBlock b = decode_params(p);
        return 2 * b.group * b.kv_rows * b.head_dim;
      });
  // Replay (npu::KernelDef::replay): the block's params bound once per
  // instruction; run() parses six of them by name per call.
  k.def.bind = [](const npu::KernelParams& p) -> std::shared_ptr<const void> {
    return std::make_shared<const AttnBlock>(decode_params(p));
  };
  k.def.replay = [](const npu::KernelInvocation& inv) {
    const auto& b = *static_cast<const AttnBlock*>(inv.bound);
    attn_block(reinterpret_cast<const bf16*>(inv.args[0].data()), reinterpret_cast<const bf16*>(inv.args[1].data()),
               reinterpret_cast<const bf16*>(inv.args[2].data()), reinterpret_cast<float*>(inv.args[3].data()), b);
  };
  return {std::move(k)};
}

}  // namespace tessera::kernels
