#include "tessera/kernels/topk.h"

#include <limits>

#include "tessera/kernels/flash_attention.h"

namespace tessera::kernels {
namespace {

// Does (v, i) rank before entry e? Any value beats an empty slot (-inf, -1),
// a real -inf logit included.
bool better(float v, int64_t i, const TopkEntry& e) {
  return e.index < 0 || v > e.value || (v == e.value && i < e.index);
}

// Inserts (v, i) into the sorted state if it beats the last entry.
void offer(TopkEntry* state, int64_t k, float v, int64_t i) {
  if (!better(v, i, state[k - 1])) return;
  int64_t pos = k - 1;
  while (pos > 0 && better(v, i, state[pos - 1])) {
    state[pos] = state[pos - 1];
    --pos;
  }
  state[pos] = {v, static_cast<int32_t>(i)};
}

}  // namespace

void topk_init(TopkEntry* state, int64_t k) {
  for (int64_t j = 0; j < k; ++j) state[j] = {-std::numeric_limits<float>::infinity(), -1};
}

void topk_block(const bf16* logits, int64_t n, int64_t index0, TopkEntry* state, int64_t k) {
  for (int64_t j = 0; j < n; ++j) {
    float v = bf16_to_f32(logits[j]);
    if (v != v) {
      throw_error<KernelNumericError>("topk_block: logit at vocab index {} is NaN", index0 + j);
    }
    offer(state, k, v, index0 + j);
  }
}

void topk_merge(TopkEntry* a, const TopkEntry* b, int64_t k) {
  for (int64_t j = 0; j < k && b[j].index >= 0; ++j) offer(a, k, b[j].value, b[j].index);
}

namespace {

int64_t k_of(const npu::KernelParams& p, const char* kernel) {
  return param_in(p, "k", 1, 1024, kernel);
}

}  // namespace

std::vector<TileKernel> topk_kernels() {
  std::vector<TileKernel> v;
  auto state_bytes = [](const char* kernel) {
    return [kernel](const npu::KernelParams& p) {
      return static_cast<int64_t>(sizeof(TopkEntry)) * k_of(p, kernel);
    };
  };
  v.push_back(make_tile_kernel(
      "topk_init",
      [](const npu::KernelInvocation& inv) {
        int64_t k = k_of(*inv.params, "topk_init");
        topk_init(arg_ptr<TopkEntry>(inv, 0, k, "topk_init", "state"), k);
      },
      [](const npu::KernelParams& p, const npu::DeviceSpec&) { return fixed_cycles(k_of(p, "topk_init")); },
      state_bytes("topk_init")));
  // Per vector: compare against the running threshold and select (2 ops);
  // per kept entry an insertion into the sorted state (k steps, bounded by k
  // insertions per block in the common case).
  v.push_back(make_tile_kernel(
      "topk_block",
      [](const npu::KernelInvocation& inv) {
        const npu::KernelParams& p = *inv.params;
        int64_t n = param_in(p, "n", 1, 1 << 24, "topk_block"), k = k_of(p, "topk_block");
        int64_t index0 = param_in(p, "index0", 0, std::numeric_limits<int32_t>::max() - n,
                                  "topk_block");
        topk_block(arg_ptr<const bf16>(inv, 0, n, "topk_block", "logits"), n, index0,
                   arg_ptr<TopkEntry>(inv, 1, k, "topk_block", "state"), k);
      },
      [](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        int64_t k = k_of(p, "topk_block");
        return vector_cycles(param_int(p, "n", "topk_block"), 2, s) + fixed_cycles(k * k);
      },
      [](const npu::KernelParams& p) {
        return 2 * param_int(p, "n", "topk_block") +
               static_cast<int64_t>(sizeof(TopkEntry)) * k_of(p, "topk_block");
      }));
  v.push_back(make_tile_kernel(
      "topk_merge",
      [](const npu::KernelInvocation& inv) {
        int64_t k = k_of(*inv.params, "topk_merge");
        topk_merge(arg_ptr<TopkEntry>(inv, 0, k, "topk_merge", "state_a"),
                   arg_ptr<const TopkEntry>(inv, 1, k, "topk_merge", "state_b"), k);
      },
      [](const npu::KernelParams& p, const npu::DeviceSpec&) {
        int64_t k = k_of(p, "topk_merge");
        return fixed_cycles(k * k);
      },
      [=](const npu::KernelParams& p) { return 2 * state_bytes("topk_merge")(p); }));
  return v;
}

}  // namespace tessera::kernels
