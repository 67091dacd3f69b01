// The `head_rmsnorm` builder (Qwen3 QK-norm): every head_dim slice of a row
// normalised with one shared weight; rows spread over the array, the weight
// broadcast once (kernels/builders/rowwise.h).
#include <memory>

#include "tessera/kernels/builders/rowwise.h"

namespace tessera::kernels {
namespace {

constexpr double kDefaultEps = 1e-6;  // Qwen3's rms_norm_eps

class HeadRmsnormBuilder : public OpBuilder {
 public:
  std::string op() const override { return "head_rmsnorm"; }
  BuiltOp build(const OpShape& shape, const npu::DeviceSpec& spec,
                const TileOptions& tiles) const override {
    const int64_t M = shape.dim("M"), heads = shape.dim("heads"), hd = shape.dim("head_dim");
    const double eps = shape.attr("eps", kDefaultEps);
    RowwiseSpec s;
    s.what = shape.key();
    s.kernel = "head_rmsnorm";
    s.rows = M;
    s.cols = heads * hd;
    s.numel = M * heads * hd;
    s.const_elems = hd;
    s.params = [eps, heads, hd](int64_t m, int64_t) {
      return npu::KernelParams{{"tokens", m}, {"heads", heads}, {"head_dim", hd}, {"eps", eps}};
    };
    return build_rowwise(shape, s, spec, tiles, {{"x", {M, heads * hd}}, {"w", {hd}}},
                         {{RowwiseInput::Role::stream, 0}, {RowwiseInput::Role::constant, 0}},
                         {"y", {M, heads * hd}});
  }
};

}  // namespace

void register_head_rmsnorm_builder() {
  register_op_builder(std::make_unique<HeadRmsnormBuilder>());
}

}  // namespace tessera::kernels
