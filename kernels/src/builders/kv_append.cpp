// The `kv_append` builder: new K or V rows [M, kv_dim] written into the cache
// [T, kv_dim] at rows pos..pos+M-1. Zero-copy: the cache host buffer is the
// output, the new rows pass through the kv_append kernel on the tiles and the
// shim writes them straight into the cache. Rows padded to the tiling carry
// the cache's own rows (pack of the cache fills them), so writing them back
// is an identity; a cache shorter than the padded run gets a tail that is
// never read back.
//
// TileOptions "cache_rows" = R (the compiler's kv-resident pass): the cache
// buffer has exactly R rows, R >= T, whatever T is, so the layout the cache
// lives in between decode steps is the same at every position and equals the
// one attention_decode reads with the same key; a padded run that would
// overrun R is a LimitError. With "cache_head_dim" = D as well the cache is
// head-major, [kv_dim / D][R][D] (attention.h, resident KV): the new rows of
// each head land in that head's run.
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
                const TileOptions& given) const override {
    TileOptions tiles = given;
    const int64_t cache_rows = tiles.count("cache_rows") ? tiles.at("cache_rows") : 0;
    const int64_t head_dim = tiles.count("cache_head_dim") ? tiles.at("cache_head_dim") : 0;
    tiles.erase("cache_rows");
    tiles.erase("cache_head_dim");
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
    if (cache_rows > 0 && cache_rows < s.out_rows)
      throw_error<LimitError>("{}: the padded run ends at row {}, past the resident cache of {} "
                              "rows", shape.key(), s.out_rows, cache_rows);
    s.out_rows = std::max(s.out_rows, cache_rows);
    if (head_dim > 0 && (cache_rows == 0 || kv % head_dim != 0))
      throw_error<LimitError>("{}: a head-major cache (cache_head_dim {}) needs cache_rows and "
                              "heads that tile kv_dim", shape.key(), head_dim);
    s.out_unit = head_dim;
    using Role = RowwiseInput::Role;
    BuiltOp out = build_rowwise(shape, s, spec, tiles, {{"new", {M, kv}}, {"cache", {T, kv}}},
                                {{Role::stream, 0}, {Role::out_init, 0}}, {"cache", {T, kv}});
    if (cache_rows > 0) out.tiles["cache_rows"] = cache_rows;
    if (head_dim > 0) out.tiles["cache_head_dim"] = head_dim;
    return out;
  }
};

}  // namespace

void register_kv_append_builder() { register_op_builder(std::make_unique<KvAppendBuilder>()); }

}  // namespace tessera::kernels
