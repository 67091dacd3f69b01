#include "tessera/core/mutants.h"
#include "host_ops.h"

#include <cmath>
#include <cstring>

#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/kernels/flash_attention.h"  // KernelNumericError

namespace tessera::runtime {

namespace {

void check_size(const kernels::OpShape& shape, const char* what, size_t got, int64_t want) {
  if (static_cast<int64_t>(got) != want)
    throw_error<InternalError>("host {}: {} has {} values, the op needs {}", shape.key(), what, got,
                               want);
}

}  // namespace

std::vector<float> host_embedding(const kernels::OpShape& shape, std::span<const float> ids,
                                  std::span<const std::byte> table) {
  const int64_t M = shape.dim("M"), V = shape.dim("V"), H = shape.dim("H");
  check_size(shape, "ids", ids.size(), M);
  check_size(shape, "the packed table (bytes)", table.size(), V * H * 2);
  std::vector<float> x(static_cast<size_t>(M * H));
  for (int64_t m = 0; m < M; ++m) {
    const float id = ids[static_cast<size_t>(m)];
    // Same rule and message as the embedding builder's pack: an id is an exact
    // integer in [0, V).
    if (!(id >= 0 && id < static_cast<float>(V)) || std::floor(id) != id)
      throw_error<InputError>("embedding: token {} has id {} (must be an integer in [0, {}))", m,
                              id, V);
    const int64_t shift = mutant_on(Mutant::host_embed_row_shift) && m == 0 && id + 1 < static_cast<float>(V) ? 1 : 0;
    const std::byte* row = table.data() + (static_cast<int64_t>(id) + shift) * H * 2;
    for (int64_t h = 0; h < H; ++h) {
      bf16 v;
      std::memcpy(&v.bits, row + h * 2, 2);
      x[static_cast<size_t>(m * H + h)] = bf16_to_f32(v);
    }
  }
  return x;
}

std::vector<float> host_kv_append(const kernels::OpShape& shape, std::span<const float> rows,
                                  std::span<const float> cache) {
  const int64_t M = shape.dim("M"), T = shape.dim("T"), pos = shape.dim("pos");
  const int64_t kv = shape.dim("kv_dim");
  check_size(shape, "new rows", rows.size(), M * kv);
  check_size(shape, "cache", cache.size(), T * kv);
  if (pos < 0 || pos + M > T)
    throw_error<InternalError>("host {}: rows {}..{} do not fit a cache of {} rows", shape.key(),
                               pos, pos + M - 1, T);
  std::vector<float> out(cache.begin(), cache.end());
  round_bf16_inplace(out);
  for (size_t i = 0; i < rows.size(); ++i)
    out[static_cast<size_t>(pos * kv) + i] = round_bf16(rows[i]);
  return out;
}

std::vector<float> host_argmax(const kernels::OpShape& shape, std::span<const float> logits) {
  const int64_t M = shape.dim("M"), V = shape.dim("V");
  check_size(shape, "logits", logits.size(), M * V);
  std::vector<float> ids(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) {
    const float* row = logits.data() + m * V;
    int64_t best = 0;
    float best_v = round_bf16(row[0]);
    for (int64_t v = 0; v < V; ++v) {
      const float x = round_bf16(row[v]);
      // The NPU's topk_block refuses NaN; so does the host.
      if (std::isnan(x))
        throw_error<kernels::KernelNumericError>("host argmax: logit at vocab index {} is NaN", v);
      if (x > best_v) {  // strict: the first index of the max wins a tie
        best = v;
        best_v = x;
      }
    }
    ids[static_cast<size_t>(m)] = static_cast<float>(best);
  }
  return ids;
}

}  // namespace tessera::runtime
