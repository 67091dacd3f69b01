// The op-builder registry, OpShape accessors, run_op's input checks and the
// shared span_pattern helper.
#include <gtest/gtest.h>

#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/op_builder.h"
#include "kernel_test_util.h"
#include "tessera/npu/device_spec.h"

namespace tessera::kernels {
namespace {

using test::linear_shape;

TEST(OpShape, KeyIsStableAndDimsAreChecked) {
  OpShape s = linear_shape(17, 2048, 8192);
  EXPECT_EQ(s.key(), "linear K=2048 M=17 N=8192");
  EXPECT_EQ(s.dim("K"), 2048);
  try {
    s.dim("P");
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'linear': dim 'P'"), std::string::npos) << e.what();
  }
  OpShape r{"rmsnorm", {{"M", 1}, {"H", 64}}, {{"eps", 1e-5}}};
  EXPECT_DOUBLE_EQ(r.attr("eps", 1e-6), 1e-5);
  EXPECT_DOUBLE_EQ(r.attr("theta", 7.0), 7.0);
  EXPECT_EQ(r.key(), "rmsnorm H=64 M=1 eps=1e-05");
}

TEST(OpBuilderRegistry, BuiltinsAreRegisteredWithoutStaticInitialisers) {
  auto names = op_names();
  for (const char* op : {"linear", "embedding", "argmax"})
    EXPECT_NE(std::find(names.begin(), names.end(), op), names.end()) << op;
  EXPECT_EQ(op_builder("linear").op(), "linear");
  try {
    op_builder("conv2d");
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'conv2d'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("linear"), std::string::npos) << e.what();
  }
}

TEST(RunOp, RejectsWrongInputCountsAndSizes) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  BuiltOp b = op_builder("linear").build(linear_shape(1, 8, 8), spec);
  std::vector<float> x(8, 1.0f), w(64, 1.0f);
  EXPECT_THROW(run_op(b, {x}, spec), UsageError);
  EXPECT_THROW(run_op(b, {x, std::vector<float>(63)}, spec), UsageError);
  OpRun ok = run_op(b, {x, w}, spec);
  ASSERT_EQ(ok.outputs.size(), 1u);
  for (float v : ok.outputs[0]) EXPECT_EQ(v, 8.0f);
}

TEST(OpBuilderRegistry, UnknownTileOptionsAreUsageErrors) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  for (const char* op : {"linear", "argmax"}) {
    OpShape s = std::string(op) == "linear" ? linear_shape(1, 8, 8)
                                            : OpShape{"argmax", {{"M", 1}, {"V", 8}}, {}};
    EXPECT_THROW(op_builder(op).build(s, spec, {{"tile_q", 8}}), UsageError) << op;
  }
  EXPECT_THROW(op_builder("embedding")
                   .build(OpShape{"embedding", {{"M", 1}, {"V", 8}, {"H", 8}}, {}}, spec,
                          {{"block", 8}}),
               UsageError);
}

TEST(SpanPattern, WholeBufferOffsetRunsAndLimits) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  npu::AccessPattern whole = span_pattern(0, 4096, 4096, 3, spec, "t");
  EXPECT_TRUE(whole.dims.empty());
  EXPECT_EQ(whole.repeat, 3);
  npu::AccessPattern mid = span_pattern(1000, 3072, 1 << 20, 1, spec, "t");
  EXPECT_EQ(mid.offset, 1000);
  EXPECT_EQ(mid.elements_per_repeat(), 3072);
  for (const auto& d : mid.dims) EXPECT_LE(d.size, spec.bd_max_size);
  EXPECT_EQ(mid.dims.back().stride, 1);
  npu::AccessPattern big = span_pattern(64, 704512, 1 << 22, 1, spec, "t");
  EXPECT_EQ(big.elements_per_repeat(), 704512);
  EXPECT_LE(big.dims.size(), static_cast<size_t>(spec.shim.bd_dims));
  // A prime run longer than the innermost wrap has no BD form.
  EXPECT_THROW(span_pattern(1, 1031 * 1031, 1 << 22, 1, spec, "prime"), LimitError);
  EXPECT_THROW(span_pattern(1, 2053, 1 << 22, 1, spec, "prime"), LimitError);
}

}  // namespace
}  // namespace tessera::kernels
