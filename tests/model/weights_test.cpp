// Weights against a config: missing, unexpected and mis-shaped tensors.
#include <gtest/gtest.h>

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

TEST(Weights, DuplicateAdd) {
  Weights w;
  w.add("x", Tensor(DType::f32, {1}));
  expect_error<TensorError>([&] { w.add("x", Tensor(DType::f32, {1})); }, {"duplicate", "'x'"});
}

}  // namespace
}  // namespace tessera::model
