// Weights against a config: missing, unexpected and mis-shaped tensors.
#include <gtest/gtest.h>

#include <cstring>

#include "model_test_util.h"
#include "tessera/core/error.h"
#include "tessera/model/weights.h"

namespace tessera::model {
namespace {

using testing::expect_error;

Weights complete(const ModelConfig& c) {
  Weights w;
  for (const auto& s : tensor_specs(c)) w.add(s.name, Tensor(DType::bf16, s.shape));
  return w;
}

TEST(Weights, CompleteSetPasses) {
  for (const char* name : {"tiny", "tiny-qwen3"}) {
    ModelConfig c = preset(name);
    Weights w = complete(c);
    EXPECT_NO_THROW(w.check_against(c)) << name;
    EXPECT_EQ(w.get(c, WeightRole::down_proj, 1).shape(), (Shape{c.hidden_size, 384}));
  }
}

TEST(Weights, MissingTensorIsNamed) {
  ModelConfig c = preset("tiny");
  Weights full = complete(c), w;
  for (const auto& n : full.names())
    if (n != "model.layers.2.mlp.up_proj.weight") w.add(n, full.get(n));
  expect_error<TensorError>([&] { w.check_against(c); },
                            {"tiny", "1 missing", "model.layers.2.mlp.up_proj.weight"});
  expect_error<TensorError>([&] { w.get(c, WeightRole::up_proj, 2); },
                            {"model.layers.2.mlp.up_proj.weight"});
}

TEST(Weights, UnexpectedTensorIsNamed) {
  ModelConfig c = preset("tiny-qwen3");
  Weights w = complete(c);
  w.add("model.layers.0.self_attn.q_proj.bias", Tensor(DType::bf16, {256}));
  expect_error<TensorError>([&] { w.check_against(c); },
                            {"unexpected", "model.layers.0.self_attn.q_proj.bias"});
}

TEST(Weights, MisShapedTensorIsNamed) {
  ModelConfig c = preset("tiny");
  Weights full = complete(c), w;
  for (const auto& n : full.names())
    w.add(n, n == "model.layers.0.self_attn.k_proj.weight" ? Tensor(DType::bf16, {128, 64})
                                                           : full.get(n));
  expect_error<TensorError>([&] { w.check_against(c); },
                            {"model.layers.0.self_attn.k_proj.weight", "[128, 64]", "[64, 128]"});
}

TEST(Weights, TiedModelToleratesStoredHead) {
  ModelConfig c = preset("tiny");
  Weights w = complete(c);
  w.add("lm_head.weight", Tensor(DType::bf16, {c.vocab_size, c.hidden_size}));
  EXPECT_NO_THROW(w.check_against(c));
  // ...but the head a tied model computes with is still the embedding.
  EXPECT_EQ(&w.get(c, WeightRole::lm_head), &w.get("model.embed_tokens.weight"));
  Weights bad = complete(c);
  bad.add("lm_head.weight", Tensor(DType::bf16, {c.vocab_size, 8}));
  expect_error<TensorError>([&] { bad.check_against(c); }, {"unexpected", "lm_head.weight"});
}

TEST(Weights, UntiedModelNeedsHead) {
  ModelConfig c = preset("tiny-qwen3");
  Weights full = complete(c), w;
  for (const auto& n : full.names())
    if (n != "lm_head.weight") w.add(n, full.get(n));
  expect_error<TensorError>([&] { w.check_against(c); }, {"missing", "lm_head.weight"});
}

// One Inf or NaN anywhere is refused with the tensor, its index and the kind,
// for every storage dtype (issue 13: an Inf in the final norm made generate
// print an empty line and exit 0).
TEST(Weights, NonFiniteElementIsNamedWithItsIndex) {
  ModelConfig c = preset("tiny");
  for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
    Weights w;
    for (const auto& s : tensor_specs(c)) {
      Tensor t(dt, s.shape);
      if (s.name == "model.layers.1.mlp.down_proj.weight") {
        // element [3, 5] (flat 3 * 384 + 5): NaN (exponent all ones, mantissa != 0)
        const size_t i = 3 * 384 + 5, b = dtype_size(dt);
        const uint32_t nan = dt == DType::f32 ? 0x7fc00000u : dt == DType::bf16 ? 0x7fc0u : 0x7e00u;
        std::memcpy(t.mutable_bytes() + i * b, &nan, b);
      }
      w.add(s.name, std::move(t));
    }
    expect_error<TensorError>([&] { w.check_finite("m"); },
                              {"m: tensor 'model.layers.1.mlp.down_proj.weight'", "element [3, 5]", "flat index 1157",
                               "is NaN"});
  }
  Weights w = complete(c);
  EXPECT_NO_THROW(w.check_finite("m"));
  Tensor inf(DType::bf16, {4});
  const uint16_t minus_inf = 0xff80;
  std::memcpy(inf.mutable_bytes() + 2 * 2, &minus_inf, 2);
  Weights one;
  one.add("x", std::move(inf));
  expect_error<TensorError>([&] { one.check_finite("m"); }, {"'x' element [2]", "-Inf"});
}

// A block format is finite exactly where its f16 scales are: an Inf m of a
// Q4_1 block (its second scale) is named at the block's first element, and
// zeroed blocks (scale 0) pass.
TEST(Weights, NonFiniteBlockScaleIsNamed) {
  Tensor q(DType::q4_1, {2, 64});  // 4 blocks of 20 bytes
  const uint16_t plus_inf = 0x7c00;
  std::memcpy(q.mutable_bytes() + 3 * 20 + 2, &plus_inf, 2);  // block 3 = row 1, columns 32..63
  Weights one;
  one.add("q", std::move(q));
  expect_error<TensorError>([&] { one.check_finite("m"); },
                            {"'q' element [1, 32]", "flat index 96", "+Inf (its block's f16 scale)"});
  Weights zero;
  zero.add("q", Tensor(DType::q8_0, {3, 32}));
  EXPECT_NO_THROW(zero.check_finite("m"));
}

TEST(Weights, DuplicateAdd) {
  Weights w;
  w.add("x", Tensor(DType::f32, {1}));
  expect_error<TensorError>([&] { w.add("x", Tensor(DType::f32, {1})); }, {"duplicate", "'x'"});
}

}  // namespace
}  // namespace tessera::model
