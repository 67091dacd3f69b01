// Oracle behaviour on weights built in-process: taps, errors, cache, dtypes.
#include "tessera/oracle/oracle.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "tessera/core/error.h"
#include "tessera/model/tensor_table.h"

namespace tessera::oracle {
namespace {

model::ModelConfig small_config(bool qk_norm, bool bias, bool tied) {
  model::ModelConfig c = model::preset("tiny-qwen3");
  c.name = "small";
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.vocab_size = 64;
  c.qk_norm = qk_norm;
  c.qkv_bias = bias;
  c.tie_word_embeddings = tied;
  c.bos_token_ids.clear();
  c.eos_token_ids.clear();
  return c;
}

model::Weights random_weights(const model::ModelConfig& c, DType dtype, uint32_t seed = 1) {
  std::mt19937 g(seed);
  model::Weights w;
  for (const auto& spec : model::tensor_specs(c)) {
    std::vector<float> v(static_cast<size_t>(shape_numel(spec.shape)));
    const bool norm = spec.shape.size() == 1 && spec.role != model::WeightRole::q_bias &&
                      spec.role != model::WeightRole::k_bias &&
                      spec.role != model::WeightRole::v_bias;
    for (float& x : v) {
      const float u = static_cast<float>(g()) / 4294967296.0f - 0.5f;
      x = norm ? 1.0f + u : u;
    }
    w.add(spec.name, Tensor::from_f32(spec.shape, v).to(dtype));
  }
  return w;
}

std::vector<int32_t> tokens(int n, int32_t vocab) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 37 + 5) % vocab));
  return t;
}

TEST(Oracle, FastPathRecordsNothingAndAllTapsRecordEveryName) {
  const auto c = small_config(true, true, false);
  const Oracle o(c, random_weights(c, DType::f32));
  Taps taps;
  KvCache cache = o.new_cache();
  const TapSet none = TapSet::none();
  o.forward(tokens(5, 64), cache, {.want = &none, .taps = &taps});
  EXPECT_TRUE(taps.keys().empty());

  const TapSet all = TapSet::all();
  cache.clear();
  o.forward(tokens(5, 64), cache, {.logits = LogitsMode::all, .want = &all, .taps = &taps});
  for (int l = 0; l < 2; ++l)
    for (const auto& n : layer_tap_names()) {
      ASSERT_TRUE(taps.contains(l, n)) << l << " " << n;
      EXPECT_EQ(taps.get(l, n).dim(0), 5) << n;
    }
  EXPECT_EQ(taps.get(0, "q").dim(1), c.q_dim());
  EXPECT_EQ(taps.get(0, "k_rot").dim(1), c.kv_dim());
  EXPECT_EQ(taps.get(1, "gate").dim(1), c.intermediate_size);
  EXPECT_EQ(taps.get(kModelLayer, "logits").shape(), (Shape{5, 64}));
  EXPECT_THROW(taps.get(2, "q"), InputError);
}

TEST(Oracle, QkNormTapsOnlyForQkNormModels) {
  const auto c = small_config(false, false, true);
  const Oracle o(c, random_weights(c, DType::f32));
  Taps taps;
  KvCache cache = o.new_cache();
  const TapSet all = TapSet::all();
  o.forward(tokens(3, 64), cache, {.want = &all, .taps = &taps});
  EXPECT_FALSE(taps.contains(0, "q_norm"));
  EXPECT_TRUE(taps.contains(0, "q_rot"));
  EXPECT_EQ(taps.get(kModelLayer, "logits").dim(0), 1);  // last position only
}

TEST(Oracle, DecodeTapsContinuePrefillTapsRowByRow) {
  const auto c = small_config(true, true, false);
  const Oracle o(c, random_weights(c, DType::f32));
  const auto t = tokens(6, 64);
  TapSet want;
  want.add("attn_out", 1).add("h_out").add("logits");
  Taps once, stepwise;
  KvCache a = o.new_cache(), b = o.new_cache();
  o.forward(t, a, {.logits = LogitsMode::all, .want = &want, .taps = &once});
  o.forward(std::span(t).first(4), b, {.logits = LogitsMode::all, .want = &want, .taps = &stepwise});
  for (size_t i = 4; i < t.size(); ++i)
    o.forward(std::span(t).subspan(i, 1), b, {.want = &want, .taps = &stepwise});
  EXPECT_FALSE(stepwise.contains(0, "attn_out"));
  for (auto [layer, name] : {std::pair<int, const char*>{1, "attn_out"}, {0, "h_out"},
                             {1, "h_out"}, {kModelLayer, "logits"}}) {
    const auto x = once.get(layer, name).to_f32_vector();
    const auto y = stepwise.get(layer, name).to_f32_vector();
    ASSERT_EQ(once.get(layer, name).shape(), stepwise.get(layer, name).shape()) << name;
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], 1e-4) << name << " " << i;
  }
}

TEST(Oracle, RejectsBadTokensWithoutTouchingTheCache) {
  const auto c = small_config(false, false, true);
  const Oracle o(c, random_weights(c, DType::f32));
  KvCache cache = o.new_cache();
  o.forward(tokens(2, 64), cache);
  const std::vector<int32_t> bad = {3, 64};
  EXPECT_THROW(o.forward(bad, cache), InputError);
  EXPECT_THROW(o.forward(std::vector<int32_t>{-1}, cache), InputError);
  EXPECT_THROW(o.forward(std::vector<int32_t>{}, cache), InputError);
  EXPECT_EQ(cache.length(), 2);
  EXPECT_EQ(cache.keys(0).size(), static_cast<size_t>(2 * c.kv_dim()));
  EXPECT_EQ(cache.bytes(), static_cast<size_t>(2 * 2 * 2 * c.kv_dim() * 4));
}

// Issue 13 cases 7-8: positions past max_position_embeddings, and a forward
// whose activations would not fit in memory, are LimitErrors raised before
// anything is allocated, leaving the cache as it was.
TEST(Oracle, PositionsAndMemoryAreCheckedBeforeAllocating) {
  auto c = small_config(false, false, true);
  c.max_position_embeddings = 8;
  const Oracle o(c, random_weights(c, DType::f32));
  KvCache cache = o.new_cache();
  o.forward(tokens(6, 64), cache);
  try {
    o.forward(tokens(3, 64), cache);
    ADD_FAILURE() << "no LimitError past max_position_embeddings";
  } catch (const LimitError& e) {
    EXPECT_NE(std::string(e.what()).find("max_position_embeddings 8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.length(), 6);
  o.forward(tokens(2, 64), cache);  // exactly up to the last position
  // 2^22 tokens: the [tokens, tokens] attention scores alone are 64 TiB.
  c.max_position_embeddings = model::kMaxPositions;
  const Oracle big(c, random_weights(c, DType::f32));
  KvCache fresh = big.new_cache();
  EXPECT_GT(big.forward_bytes(int64_t{1} << 22, 0, false), size_t{1} << 46);
  try {
    big.forward(tokens(1 << 22, 64), fresh);
    ADD_FAILURE() << "no LimitError for a forward larger than memory";
  } catch (const LimitError& e) {
    EXPECT_NE(std::string(e.what()).find("GB of activations"), std::string::npos) << e.what();
  }
  EXPECT_EQ(fresh.length(), 0);
}

TEST(Oracle, UnknownTapNameIsAUsageError) {
  TapSet t;
  EXPECT_THROW(t.add("qrot"), UsageError);
  EXPECT_THROW(t.add("logits", 3), UsageError);
  EXPECT_THROW(t.add("h_out", kModelLayer), UsageError);
  EXPECT_NO_THROW(t.add("h_out", 0));
  EXPECT_TRUE(t.wants(0, "h_out"));
  EXPECT_FALSE(t.wants(1, "h_out"));
}

TEST(Oracle, MissingWeightIsATensorError) {
  const auto c = small_config(true, false, false);
  const auto full = random_weights(c, DType::f32);
  model::Weights partial;
  for (const auto& n : full.names())
    if (n.find("q_norm") == std::string::npos) partial.add(n, full.get(n));
  EXPECT_THROW(Oracle(c, partial), TensorError);
}

TEST(Oracle, Bf16WeightMatricesAreViewedAndGiveTheLogitsOfTheirF32Widening) {
  for (const bool tied : {false, true}) {
    const auto c = small_config(true, true, tied);
    const auto w32 = random_weights(c, DType::f32);
    const Oracle o32(c, w32);
    EXPECT_EQ(o32.converted_weight_bytes(), 0u);
    const auto w16 = random_weights(c, DType::bf16);
    const Oracle o16(c, w16);
    // Only the 1-D tensors (norms, biases) are converted; the matrices are views.
    size_t small = 0;
    for (const auto& n : w16.names())
      if (w16.get(n).rank() == 1) small += static_cast<size_t>(w16.get(n).numel()) * 4;
    EXPECT_EQ(o16.converted_weight_bytes(), small);
    // Same bf16-rounded values in f32 must give the same logits bit for bit,
    // in a prefill (sgemm on the widened matrix) and in decode steps (sgemv
    // on blocks of rows).
    model::Weights rounded;
    for (const auto& n : w32.names()) rounded.add(n, w32.get(n).to(DType::bf16).to(DType::f32));
    const Oracle or32(c, rounded);
    KvCache a = o16.new_cache(), b = or32.new_cache();
    EXPECT_EQ(o16.forward(tokens(4, 64), a, {.logits = LogitsMode::all}).to_f32_vector(),
              or32.forward(tokens(4, 64), b, {.logits = LogitsMode::all}).to_f32_vector());
    for (const int32_t t : {7, 63, 0}) {
      const int32_t one[] = {t};
      EXPECT_EQ(o16.forward(one, a).to_f32_vector(), or32.forward(one, b).to_f32_vector()) << t;
    }
  }
}

}  // namespace
}  // namespace tessera::oracle
