// The `rope` builder: HF rotate_half RoPE on [M, heads * head_dim] with the
// cos / sin rows (oracle::rope_table, positions pos0..) as f32 inputs. Heads
// mode of kernels/builders/rowwise.h: the tiles of a column share rows and
// split the heads (padded heads are zero and never read back), so each
// column's table rows are broadcast to its tiles.
#include <memory>

#include "tessera/core/error.h"
#include "tessera/kernels/builders/rowwise.h"

namespace tessera::kernels {
namespace {

class RopeBuilder : public OpBuilder {
 public:
  std::string op() const override { return "rope"; }
  BuiltOp build(const OpShape& shape, const npu::DeviceSpec& spec,
                const TileOptions& tiles) const override {
    const int64_t M = shape.dim("M"), heads = shape.dim("heads"), hd = shape.dim("head_dim");
    if (hd < 2 || hd % 2 || heads < 1)
      throw_error<LimitError>("{}: rope needs an even head_dim >= 2 and heads >= 1", shape.key());
    RowwiseSpec s;
    s.what = shape.key();
    s.kernel = "rope";
    s.rows = M;
    s.cols = heads * hd;
    s.numel = M * heads * hd;
    s.heads = heads;
    s.unit = hd;
    s.side_cols = hd / 2;
    s.params = [hd](int64_t m, int64_t wt) {
      return npu::KernelParams{
          {"rows", m}, {"heads", wt / hd}, {"head_dim", hd}, {"table", std::string("f32")}};
    };
    using Role = RowwiseInput::Role;
    return build_rowwise(shape, s, spec, tiles,
                         {{"x", {M, heads * hd}}, {"cos", {M, hd / 2}}, {"sin", {M, hd / 2}}},
                         {{Role::stream, 0}, {Role::side, 0}, {Role::side, 1}},
                         {"y", {M, heads * hd}});
  }
};

}  // namespace

void register_rope_builder() { register_op_builder(std::make_unique<RopeBuilder>()); }

}  // namespace tessera::kernels
