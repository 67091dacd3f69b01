// The `bias_add` builder (Qwen2 q/k/v bias): rows spread over the array, the
// bias broadcast once (kernels/builders/rowwise.h).
#include <memory>

#include "tessera/kernels/builders/rowwise.h"

namespace tessera::kernels {
namespace {

class BiasAddBuilder : public OpBuilder {
 public:
  std::string op() const override { return "bias_add"; }
  BuiltOp build(const OpShape& shape, const npu::DeviceSpec& spec,
                const TileOptions& tiles) const override {
    const int64_t M = shape.dim("M"), N = shape.dim("N");
    RowwiseSpec s;
    s.what = shape.key();
    s.kernel = "bias_add";
    s.rows = M;
    s.cols = N;
    s.numel = M * N;
    s.const_elems = N;
    s.params = [](int64_t m, int64_t wt) { return npu::KernelParams{{"rows", m}, {"n", wt}}; };
    return build_rowwise(shape, s, spec, tiles, {{"x", {M, N}}, {"b", {N}}},
                         {{RowwiseInput::Role::stream, 0}, {RowwiseInput::Role::constant, 0}},
                         {"y", {M, N}});
  }
};

}  // namespace

void register_bias_add_builder() { register_op_builder(std::make_unique<BiasAddBuilder>()); }

}  // namespace tessera::kernels
