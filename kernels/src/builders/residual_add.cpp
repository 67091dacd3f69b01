// The `residual_add` builder: y = a + b, a and b as paired objects of one
// stream (kernels/builders/rowwise.h).
#include <memory>

#include "tessera/kernels/builders/rowwise.h"

namespace tessera::kernels {
namespace {

class ResidualAddBuilder : public OpBuilder {
 public:
  std::string op() const override { return "residual_add"; }
  BuiltOp build(const OpShape& shape, const npu::DeviceSpec& spec,
                const TileOptions& tiles) const override {
    return build_elementwise2(shape, "residual_add", spec, tiles, "a", "b", "y");
  }
};

}  // namespace

void register_residual_add_builder() {
  register_op_builder(std::make_unique<ResidualAddBuilder>());
}

}  // namespace tessera::kernels
