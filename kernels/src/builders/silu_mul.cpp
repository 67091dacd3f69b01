// The `silu_mul` builder: act = silu(gate) * up, gate and up as paired objects
// of one stream (kernels/builders/rowwise.h).
#include <memory>

#include "tessera/kernels/builders/rowwise.h"

namespace tessera::kernels {
namespace {

class SiluMulBuilder : public OpBuilder {
 public:
  std::string op() const override { return "silu_mul"; }
  BuiltOp build(const OpShape& shape, const npu::DeviceSpec& spec,
                const TileOptions& tiles) const override {
    return build_elementwise2(shape, "silu_mul", spec, tiles, "gate", "up", "act");
  }
};

}  // namespace

void register_silu_mul_builder() { register_op_builder(std::make_unique<SiluMulBuilder>()); }

}  // namespace tessera::kernels
