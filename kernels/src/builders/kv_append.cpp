// The `kv_append` builder: new K or V rows [M, kv_dim] written into the cache
// [T, kv_dim] at rows pos..pos+M-1. Zero-copy: the cache host buffer is the
// output, the new rows pass through the kv_append kernel on the tiles and the
// shim writes them straight into the cache. Rows padded to the tiling carry
// the cache's own rows (pack of the cache fills them), so writing them back
// is an identity; a cache shorter than the padded run gets a tail that is
// never read back.
#include <algorithm>
#include <memory>

#include "tessera/core/error.h"
#include "tessera/kernels/builders/rowwise.h"

namespace tessera::kernels {
namespace {

class KvAppendBuilder : public OpBuilder {
 public:
  std::string op() const override { return "kv_append"; }
  BuiltOp build(const OpShape& shape, const npu::DeviceSpec& spec,
                const TileOptions& tiles) const override {
    const int64_t M = shape.dim("M"), T = shape.dim("T"), pos = shape.dim("pos");
    const int64_t kv = shape.dim("kv_dim");
    if (M < 1 || pos < 0 || pos + M > T || kv < 2 || kv % 2)
      throw_error<LimitError>("{}: needs M >= 1, 0 <= pos, pos + M <= T (cache rows) and an even "
                              "kv_dim", shape.key());
    RowwiseSpec s;
    s.what = shape.key();
    s.kernel = "kv_append";
    s.rows = M;
    s.cols = kv;
    s.numel = M * kv;
    s.params = [](int64_t m, int64_t wt) {
      return npu::KernelParams{{"rows", m}, {"head_dim", wt}, {"dst_row", int64_t{0}},
                               {"capacity", m}};
    };
    s.out_host = "cache";
    s.out_row0 = pos;
    s.out_rows = std::max(T, pos + plan_rowwise(s, spec, tiles).rows_padded());
    using Role = RowwiseInput::Role;
    return build_rowwise(shape, s, spec, tiles, {{"new", {M, kv}}, {"cache", {T, kv}}},
                         {{Role::stream, 0}, {Role::out_init, 0}}, {"cache", {T, kv}});
  }
};

}  // namespace

void register_kv_append_builder() { register_op_builder(std::make_unique<KvAppendBuilder>()); }

}  // namespace tessera::kernels
