#include "tessera/kernels/embedding.h"

#include <algorithm>

namespace tessera::kernels {
namespace {
constexpr const char* kEmbeddingName = "embedding_gather";
}

int64_t embedding_gather(const int32_t* ids, const bf16* table, bf16* out,
                         const EmbeddingBlock& b) {
  int64_t copied = 0;
  for (int64_t t = 0; t < b.count; ++t) {
    const int64_t id = ids[t];
    if (id < 0 || id >= b.vocab) {
      throw_error<KernelArgError>("kernel {}: token {} has id {} outside the vocab [0, {})",
                                  kEmbeddingName, t, id, b.vocab);
    }
    if (id < b.row0 || id >= b.row0 + b.block_rows) continue;
    const bf16* row = table + (id - b.row0) * b.hidden;
    std::copy(row, row + b.hidden, out + t * b.hidden);
    ++copied;
  }
  return copied;
}

namespace {

EmbeddingBlock embedding_params(const npu::KernelParams& p) {
  EmbeddingBlock b;
  b.count = param_in(p, "count", 1, 1 << 20, kEmbeddingName);
  b.hidden = param_in(p, "hidden", 1, 1 << 16, kEmbeddingName);
  b.vocab = param_in(p, "vocab", 1, int64_t{1} << 31, kEmbeddingName);
  b.block_rows = param_in(p, "block_rows", 1, b.vocab, kEmbeddingName);
  b.row0 = param_in(p, "row0", 0, b.vocab - 1, kEmbeddingName);
  return b;
}

void run_embedding(const npu::KernelInvocation& inv) {
  EmbeddingBlock b = embedding_params(*inv.params);
  embedding_gather(arg_ptr<const int32_t>(inv, 0, b.count, kEmbeddingName, "ids"),
                   arg_ptr<const bf16>(inv, 1, b.block_rows * b.hidden, kEmbeddingName, "table"),
                   arg_ptr<bf16>(inv, 2, b.count * b.hidden, kEmbeddingName, "out"), b);
}

}  // namespace

std::vector<TileKernel> embedding_kernels() {
  return {make_tile_kernel(
      kEmbeddingName, run_embedding,
      // Scalar id compare per token, then (at most) one row copy per token:
      // costed as if every token hit this block (the worst case; the data
      // decides the real count, the static model cannot see it).
      [](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        EmbeddingBlock b = embedding_params(p);
        return static_cast<double>(b.count) * (fixed_cycles(4) + copy_cycles(2 * b.hidden, s));
      },
      [](const npu::KernelParams& p) {
        EmbeddingBlock b = embedding_params(p);
        return 4 * b.count + 2 * (b.block_rows + b.count) * b.hidden;
      })};
}

}  // namespace tessera::kernels
