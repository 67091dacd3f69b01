// The `rmsnorm` builder: y[M,H] = rms_norm(x) * w, rows spread over the array,
// w broadcast once (kernels/builders/rowwise.h).
#include <memory>

#include <fmt/format.h>

#include "tessera/kernels/builders/rowwise.h"

namespace tessera::kernels {
namespace {

// HF LlamaRMSNorm's default; models pass their own as attr "eps".
constexpr double kDefaultEps = 1e-6;

class RmsnormBuilder : public OpBuilder {
 public:
  std::string op() const override { return "rmsnorm"; }
  BuiltOp build(const OpShape& shape, const npu::DeviceSpec& spec,
                const TileOptions& tiles) const override {
    const int64_t M = shape.dim("M"), H = shape.dim("H");
    const double eps = shape.attr("eps", kDefaultEps);
    RowwiseSpec s;
    s.what = shape.key();
    s.kernel = "rmsnorm";
    s.rows = M;
    s.cols = H;
    s.numel = M * H;
    s.const_elems = H;
    s.params = [eps](int64_t m, int64_t wt) {
      return npu::KernelParams{{"rows", m}, {"n", wt}, {"eps", eps}};
    };
    return build_rowwise(shape, s, spec, tiles, {{"x", {M, H}}, {"w", {H}}},
                         {{RowwiseInput::Role::stream, 0}, {RowwiseInput::Role::constant, 0}},
                         {"y", {M, H}});
  }
};

}  // namespace

void register_rmsnorm_builder() { register_op_builder(std::make_unique<RmsnormBuilder>()); }

}  // namespace tessera::kernels
