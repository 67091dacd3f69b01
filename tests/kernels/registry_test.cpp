// The library as the simulator and timing model see it: every kernel
// registered, with a cost, MACs and an L1 footprint for typical params.
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace tessera::kernels::test {
namespace {

// Typical params per kernel (llama-3.2-1b-like decode / prefill blocks).
const std::map<std::string, npu::KernelParams>& typical() {
  static const std::map<std::string, npu::KernelParams> p = {
      {"gemm_init", {{"m", 64}, {"k", 64}, {"n", 64}}},
      {"gemm_acc", {{"m", 64}, {"k", 64}, {"n", 64}}},
      {"gemm", {{"m", 64}, {"k", 64}, {"n", 64}}},
      {"gemm_finalize", {{"count", 4096}}},
      {"gemv_init", {{"n", 64}, {"k", 256}}},
      {"gemv_acc", {{"n", 64}, {"k", 256}}},
      {"gemv", {{"n", 64}, {"k", 256}}},
      {"rmsnorm", {{"rows", 4}, {"n", 2048}, {"eps", 1e-5}}},
      {"head_rmsnorm", {{"tokens", 4}, {"heads", 8}, {"head_dim", 128}, {"eps", 1e-6}}},
      {"rope", {{"rows", 4}, {"heads", 8}, {"head_dim", 64}}},
      {"silu_mul", {{"count", 4096}}},
      {"residual_add", {{"count", 4096}}},
      {"bias_add", {{"rows", 4}, {"n", 1024}}},
      {"softmax", {{"rows", 4}, {"n", 1024}}},
      {"flash_attn", {{"q_rows", 16}, {"group", 4}, {"kv_rows", 64}, {"head_dim", 64}}},
      {"attn_scores", {{"q_rows", 16}, {"group", 4}, {"kv_rows", 64}, {"head_dim", 64}}},
      {"attn_pv", {{"q_rows", 16}, {"group", 4}, {"kv_rows", 64}, {"head_dim", 64}}},
      {"attn_copy", {{"elems", 4096}}},
      {"decode_attn", {{"group", 4}, {"kv_rows", 128}, {"head_dim", 64}}},
      {"attn_init", {{"rows", 4}, {"head_dim", 64}}},
      {"attn_merge", {{"rows", 4}, {"head_dim", 64}}},
      {"attn_finalize", {{"rows", 4}, {"head_dim", 64}}},
      {"kv_append", {{"rows", 1}, {"head_dim", 64}, {"dst_row", 10}, {"capacity", 256}}},
      {"embedding_gather",
       {{"count", 4}, {"hidden", 2048}, {"row0", 0}, {"block_rows", 8}, {"vocab", 128256}}},
      {"topk_init", {{"k", 8}}},
      {"topk_block", {{"n", 4096}, {"k", 8}, {"index0", 0}}},
      {"topk_merge", {{"k", 8}}},
  };
  return p;
}

TEST(TileKernels, EveryKernelIsRegisteredWithCostAndFootprint) {
  npu::DeviceSpec spec = npu::DeviceSpec::preset("xdna2-sourced");
  ASSERT_EQ(tile_kernels().size(), typical().size());
  for (const TileKernel& t : tile_kernels()) {
    SCOPED_TRACE(t.def.name);
    ASSERT_TRUE(typical().count(t.def.name));
    const npu::KernelParams& p = typical().at(t.def.name);
    const npu::KernelDef& def = registry().get(t.def.name);
    EXPECT_GT(def.cycles(p, spec), spec.core_call_overhead_cycles);
    ASSERT_TRUE(def.cost) << "the timing model needs the split by unit";
    EXPECT_NEAR(def.cost(p, spec).total(), static_cast<double>(def.cycles(p, spec)), 0.5);
    EXPECT_GE(def.macs(p), 0);
    const int64_t l1 = tile_kernel_l1_bytes(t.def.name, p);
    EXPECT_GT(l1, 0);
    EXPECT_LE(l1, spec.compute.memory_bytes) << "typical params must fit one tile";
  }
  EXPECT_THROW(tile_kernel_l1_bytes("no_such_kernel", {}), KernelArgError);
}

// Cost grows with the work and follows the DeviceSpec, not constants.
TEST(TileKernels, CostFollowsDeviceSpec) {
  npu::DeviceSpec spec = npu::DeviceSpec::preset("xdna2-sourced");
  npu::DeviceSpec half = spec;
  half.macs_per_cycle_bf16 /= 2;
  half.vector_lanes_bf16 /= 2;
  for (const char* name : {"gemm", "flash_attn", "softmax", "gemv"}) {
    const auto& def = registry().get(name);
    EXPECT_GT(def.cycles(typical().at(name), half), def.cycles(typical().at(name), spec)) << name;
  }
}

// Non-MAC work follows the vector unit's rate: halving vector_lanes_per_cycle
// nearly doubles the vector part (fixed per-row folds excepted), and leaves a GEMM's
// matrix-unit cycles alone; exp costs what the spec says an exp costs.
TEST(TileKernels, VectorWorkFollowsLaneRate) {
  npu::DeviceSpec spec = npu::DeviceSpec::preset("xdna2-sourced");
  npu::DeviceSpec slow = spec;
  slow.vector_lanes_per_cycle = spec.vector_lanes_per_cycle / 2;
  for (const char* name : {"softmax", "silu_mul", "rmsnorm", "rope"}) {
    const auto& def = registry().get(name);
    const auto a = def.cost(typical().at(name), spec), b = def.cost(typical().at(name), slow);
    EXPECT_GT(b.vector, 1.5 * a.vector) << name;
    EXPECT_EQ(a.mac, 0) << name;
  }
  const auto& gemm = registry().get("gemm");
  EXPECT_EQ(gemm.cost(typical().at("gemm"), slow).mac, gemm.cost(typical().at("gemm"), spec).mac);
  // GEMV dot products follow their own MAC rate, not the elementwise rate.
  const auto& gemv = registry().get("gemv");
  const npu::KernelParams& gp = typical().at("gemv");
  EXPECT_EQ(gemv.cost(gp, slow).vector, gemv.cost(gp, spec).vector);
  npu::DeviceSpec slow_gemv = spec;
  slow_gemv.gemv_macs_per_cycle = spec.gemv_macs_per_cycle / 2;
  EXPECT_GT(gemv.cost(gp, slow_gemv).vector, 1.5 * gemv.cost(gp, spec).vector);
  npu::DeviceSpec dear_exp = spec;
  dear_exp.vector_exp_ops = spec.vector_exp_ops + 2;
  const auto& silu = registry().get("silu_mul");
  EXPECT_GT(silu.cost(typical().at("silu_mul"), dear_exp).vector,
            silu.cost(typical().at("silu_mul"), spec).vector);
}

TEST(TileKernels, ShortArgIsAnErrorNamingTheArg) {
  std::vector<bf16> a(10), b(10), out(9);
  try {
    run_kernel("residual_add", {{"count", 10}}, {bytes_of(a), bytes_of(b), bytes_of(out)});
    FAIL() << "no error";
  } catch (const KernelArgError& e) {
    EXPECT_NE(std::string(e.what()).find("'out'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::kernels::test
