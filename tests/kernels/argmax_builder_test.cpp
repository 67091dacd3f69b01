// argmax builder: first index of the max per row, across tiles and objects,
// with ties, all-negative rows (zero padding must not win) and vocabularies
// smaller than the array; every preset's LM-head vocab builds and the largest
// one is simulated.
#include <limits>

#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/model/config.h"
#include "tessera/npu/timing.h"

namespace tessera::kernels {
namespace {

OpShape am(int64_t M, int64_t V) { return OpShape{"argmax", {{"M", M}, {"V", V}}, {}}; }

// The oracle rule on the bf16 values the device sees: first index of the max.
std::vector<float> reference(const std::vector<float>& logits, int64_t M, int64_t V) {
  std::vector<float> ids(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) {
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (round_bf16(logits[m * V + v]) > round_bf16(logits[m * V + best])) best = v;
    ids[m] = static_cast<float>(best);
  }
  return ids;
}

void check_argmax(int64_t M, int64_t V, const npu::DeviceSpec& spec, float lo, float hi,
                  const TileOptions& tiles = {}) {
  SCOPED_TRACE(fmt::format("argmax M={} V={} on {}", M, V, spec.name));
  BuiltOp b = op_builder("argmax").build(am(M, V), spec, tiles);
  auto raw = test::random_bf16(static_cast<size_t>(M * V), 11, lo, hi);
  std::vector<float> logits(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) logits[i] = bf16_to_f32(raw[i]);
  // A tie of the row max between two tiles' ranges: the first must win.
  if (V > 3) {
    logits[V - 1] = hi + 1;
    logits[V / 2] = hi + 1;
  }
  OpRun run = run_op(b, {logits}, spec);
  EXPECT_EQ(run.outputs[0], reference(logits, M, V));
}

class ArgmaxOnDevice : public ::testing::TestWithParam<std::string> {
 protected:
  npu::DeviceSpec spec = npu::DeviceSpec::preset(GetParam());
};

TEST_P(ArgmaxOnDevice, MatchesFirstIndexOfTheMax) {
  check_argmax(1, 1000, spec, -1, 1);
  check_argmax(3, 5001, spec, -1, 1);
  check_argmax(2, 10, spec, -1, 1);      // fewer logits than tiles
  check_argmax(1, 3, spec, -1, 1);
  check_argmax(4, 777, spec, -9, -1);    // all negative: padding zeros must not win
  check_argmax(2, 4099, spec, -9, -1, {{"block", 40}});  // many objects per tile
}

INSTANTIATE_TEST_SUITE_P(Presets, ArgmaxOnDevice, ::testing::Values("xdna2", "xdna1"));

TEST(ArgmaxBuilder, LargestVocabOnTheSimulator) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  check_argmax(1, 151936, spec, -4, 4);
}

TEST(ArgmaxBuilder, BadShapesAreLimitErrors) {
  auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  EXPECT_THROW(op_builder("argmax").build(am(1, 0), spec), LimitError);
  EXPECT_THROW(op_builder("argmax").build(am(1, 100), spec, {{"block", 1 << 20}}), LimitError);
}

TEST(ArgmaxBuilder, EveryPresetShapeBuildsAndValidates) {
  for (const auto& dev : {"xdna2", "xdna1"}) {
    auto spec = npu::DeviceSpec::preset(dev);
    for (const auto& name : model::preset_names()) {
      model::ModelConfig c = model::preset(name);
      for (int64_t M : {1, 17}) {
        SCOPED_TRACE(fmt::format("{} {} M={}", dev, name, M));
        BuiltOp b = op_builder("argmax").build(am(M, c.vocab_size), spec);
        EXPECT_GT(npu::estimate_time(b.design, spec).total_seconds, 0);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::kernels
