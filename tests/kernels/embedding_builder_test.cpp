// embedding builder: rows gathered bit-exactly through patched DMA offsets,
// over several columns and rounds of one launch, on both device presets; bad
// ids are input errors; every preset's shape builds.
#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/npu/errors.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/model/config.h"
#include "tessera/npu/timing.h"

namespace tessera::kernels {
namespace {

OpShape emb(int64_t M, int64_t V, int64_t H) {
  return OpShape{"embedding", {{"M", M}, {"V", V}, {"H", H}}, {}};
}

std::vector<float> table_values(int64_t V, int64_t H) {
  auto t = test::random_bf16(static_cast<size_t>(V * H), 7, -2.0f, 2.0f);
  std::vector<float> f(t.size());
  for (size_t i = 0; i < t.size(); ++i) f[i] = bf16_to_f32(t[i]);
  return f;
}

void check_gather(int64_t M, int64_t V, int64_t H, const npu::DeviceSpec& spec) {
  SCOPED_TRACE(fmt::format("embedding M={} V={} H={} on {}", M, V, H, spec.name));
  BuiltOp b = op_builder("embedding").build(emb(M, V, H), spec);
  std::vector<float> ids(static_cast<size_t>(M));
  // First and last rows, repeats, and a stride that visits the whole vocab.
  for (int64_t t = 0; t < M; ++t) ids[t] = static_cast<float>(t == 1 ? V - 1 : (t * 37) % V);
  auto table = table_values(V, H);
  OpRun run = run_op(b, {ids, table}, spec);
  ASSERT_EQ(run.outputs[0].size(), static_cast<size_t>(M * H));
  int64_t wrong = 0;
  for (int64_t t = 0; t < M; ++t)
    for (int64_t h = 0; h < H; ++h)
      wrong += run.outputs[0][t * H + h] != table[static_cast<int64_t>(ids[t]) * H + h];
  EXPECT_EQ(wrong, 0);
  // Exactly the gathered rows move: M rows read, M rows written.
  EXPECT_EQ(run.stats.ddr_bytes(), 2 * M * H * 2);
}

class EmbeddingOnDevice : public ::testing::TestWithParam<std::string> {
 protected:
  npu::DeviceSpec spec = npu::DeviceSpec::preset(GetParam());
};

TEST_P(EmbeddingOnDevice, GathersExactRows) {
  check_gather(1, 50, 64, spec);
  check_gather(5, 1000, 576, spec);
  check_gather(130, 997, 3072, spec);  // several columns and launches, H > BD wrap
}

INSTANTIATE_TEST_SUITE_P(Presets, EmbeddingOnDevice, ::testing::Values("xdna2", "xdna1"));

// Any prompt length in one launch: after each round of runs (one per column)
// the sequence waits and the next round reuses the shim BDs (at 2048 tokens
// that was 18 launches). Exact at 2048 and 8192 tokens.
TEST(EmbeddingBuilder, LongPromptsTakeOneLaunchAndStayExact) {
  auto spec = npu::DeviceSpec::preset("xdna2");
  for (int64_t M : {2048, 8192}) {
    EXPECT_EQ(op_builder("embedding").build(emb(M, 300, 64), spec).design.launches.size(), 1u);
    check_gather(M, 300, 64, spec);
  }
}

// The shim BD limit still holds: the same design with its waits dropped
// needs a BD per task and is refused with a typed error naming the limit.
TEST(EmbeddingBuilder, DroppedWaitsAreRefusedByTheBdLimit) {
  auto spec = npu::DeviceSpec::preset("xdna2");
  npu::Design planted = op_builder("embedding").build(emb(2048, 300, 64), spec).design;
  int waits = 0;
  for (auto& t : planted.launches.at(0).sequence) {
    waits += t.after_wait ? 1 : 0;
    t.after_wait = false;
  }
  EXPECT_EQ(waits, 17);  // 2048 tokens in rounds of 8 columns x 15 rows: 18 rounds
  try {
    validate_design(planted, spec);
    FAIL() << "a shim with a BD per token must be refused";
  } catch (const npu::DesignError& e) {
    EXPECT_NE(std::string(e.what()).find("buffer descriptors"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("limit 16"), std::string::npos) << e.what();
  }
}

TEST(EmbeddingBuilder, TimingDoesNotDependOnIds) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  BuiltOp b = op_builder("embedding").build(emb(20, 100, 64), spec);
  EXPECT_GT(b.design.launches.size(), 0u);
  EXPECT_TRUE(static_cast<bool>(b.patch));
  npu::HostMemory host;
  std::vector<float> ids(20, 99.0f);
  b.pack(0, ids, host);
  npu::Design patched = b.patch(b.design, host);
  EXPECT_NE(patched.dump(), b.design.dump());  // the offsets did change
  EXPECT_DOUBLE_EQ(npu::estimate_time(patched, spec).total_seconds,
                   npu::estimate_time(b.design, spec).total_seconds);
}

TEST(EmbeddingBuilder, BadIdsAreInputErrors) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  BuiltOp b = op_builder("embedding").build(emb(2, 10, 8), spec);
  auto table = table_values(10, 8);
  EXPECT_THROW(run_op(b, {{1.0f, 10.0f}, table}, spec), InputError);
  EXPECT_THROW(run_op(b, {{-1.0f, 0.0f}, table}, spec), InputError);
  EXPECT_THROW(run_op(b, {{1.5f, 0.0f}, table}, spec), InputError);
  EXPECT_THROW(op_builder("embedding").build(emb(2, 10, 7), spec), LimitError);
}

TEST(EmbeddingBuilder, EveryPresetShapeBuildsAndValidates) {
  for (const auto& dev : {"xdna2", "xdna1"}) {
    auto spec = npu::DeviceSpec::preset(dev);
    for (const auto& name : model::preset_names()) {
      model::ModelConfig c = model::preset(name);
      for (int64_t S : {1, 17, 2048}) {
        SCOPED_TRACE(fmt::format("{} {} S={}", dev, name, S));
        BuiltOp b = op_builder("embedding").build(emb(S, c.vocab_size, c.hidden_size), spec);
        EXPECT_GT(npu::estimate_time(b.design, spec).total_seconds, 0);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::kernels
