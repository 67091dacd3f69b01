#include "tessera/kernels/kv_append.h"

#include <algorithm>

namespace tessera::kernels {

void kv_append(const bf16* src, bf16* dst, const KvAppend& a) {
  for (int64_t r = 0; r < a.rows; ++r) {
    const bf16* s = src + r * a.src_stride + a.src_col;
    if (!a.transposed) {
      std::copy(s, s + a.head_dim, dst + (a.dst_row + r) * a.head_dim);
    } else {
      for (int64_t j = 0; j < a.head_dim; ++j) dst[j * a.capacity + a.dst_row + r] = s[j];
    }
  }
}

namespace {

constexpr const char* kKvAppendName = "kv_append";

KvAppend kv_append_params(const npu::KernelParams& p) {
  KvAppend a;
  a.rows = param_in(p, "rows", 1, 1 << 20, kKvAppendName);
  a.head_dim = param_in(p, "head_dim", 1, 4096, kKvAppendName);
  a.capacity = param_in(p, "capacity", 1, 1 << 24, kKvAppendName);
  a.dst_row = param_in(p, "dst_row", 0, a.capacity - a.rows, kKvAppendName);
  a.src_stride = param_int_or(p, "src_stride", a.head_dim, kKvAppendName);
  a.src_col = param_int_or(p, "src_col", 0, kKvAppendName);
  if (a.src_col < 0 || a.src_col + a.head_dim > a.src_stride) {
    throw_error<KernelArgError>("kernel {}: src_col {} + head_dim {} exceeds src_stride {}",
                                kKvAppendName, a.src_col, a.head_dim, a.src_stride);
  }
  std::string layout = param_str_or(p, "layout", "rows", kKvAppendName);
  if (layout != "rows" && layout != "transposed") {
    throw_error<KernelArgError>("kernel {}: layout '{}' is neither 'rows' nor 'transposed'",
                                kKvAppendName, layout);
  }
  a.transposed = layout == "transposed";
  return a;
}

void run_kv_append(const npu::KernelInvocation& inv) {
  KvAppend a = kv_append_params(*inv.params);
  kv_append(arg_ptr<const bf16>(inv, 0, a.rows * a.src_stride, kKvAppendName, "src"),
            arg_ptr<bf16>(inv, 1, a.capacity * a.head_dim, kKvAppendName, "dst"), a);
}

}  // namespace

std::vector<TileKernel> kv_append_kernels() {
  return {make_tile_kernel(
      kKvAppendName, run_kv_append,
      // Row layout: vector copies. Transposed: one element per lane shuffle
      // step, i.e. a vector op per `lanes` elements plus a shuffle each.
      [](const npu::KernelParams& p, const npu::DeviceSpec& s) {
        KvAppend a = kv_append_params(p);
        int64_t elems = a.rows * a.head_dim;
        return a.transposed ? vector_cycles(elems, 2, s) : copy_cycles(2 * elems, s);
      },
      [](const npu::KernelParams& p) {
        KvAppend a = kv_append_params(p);
        return 2 * (a.rows * a.src_stride + a.capacity * a.head_dim);
      })};
}

}  // namespace tessera::kernels
