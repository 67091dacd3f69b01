// Synthetic model directories: round trip through load_model_dir,
// determinism, weight statistics, tokenizer.json structure, and the errors of
// load_model_dir.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "tessera/core/error.h"
#include "tessera/model/model_dir.h"
#include "tessera/model/synth.h"
#include "tessera/model/tokenizer.h"

namespace tessera::model {
namespace {

using testing::expect_error;
using testing::read_file;
using testing::TempDir;

TEST(Synth, RoundTripThroughLoadModelDir) {
  TempDir d;
  write_synthetic_model(preset("tiny"), d / "m", 7);
  ModelDir m = load_model_dir(d / "m");
  ModelConfig want = synthetic_config(preset("tiny"), std::nullopt);
  want.name = "m";
  EXPECT_EQ(m.config, want);
  EXPECT_EQ(m.weights.size(), tensor_specs(m.config).size());
  for (const auto& n : m.weights.names()) EXPECT_EQ(m.weights.get(n).dtype(), DType::bf16);
}

// A tokenizer that can produce an id the embedding does not have is refused
// when it is loaded for the model, not when real text first hits the id.
TEST(Synth, TokenizerIdsBeyondTheVocabularyAreRefusedAtLoad) {
  TempDir d;
  write_synthetic_model(preset("tiny"), d / "m", 7);
  const ModelConfig c = load_config(d / "m/config.json");
  EXPECT_EQ(load_tokenizer(d / "m/tokenizer.json", c).vocab_size(), c.vocab_size);
  auto j = nlohmann::json::parse(read_file(d / "m/tokenizer.json"));
  j["added_tokens"].push_back({{"id", 700}, {"content", "<zz>"}, {"special", true}});
  testing::write_file(d / "m/tokenizer.json", j.dump());
  expect_error<TokenizerError>([&] { load_tokenizer(d / "m/tokenizer.json", c); },
                               {"tokenizer.json", "token id 700 ('<zz>')", "[0, 512)"});
  expect_error<FileError>([&] { load_tokenizer(d / "none.json", c); }, {"none.json"});
}

TEST(Synth, SameSeedSameBytesOtherSeedOtherWeights) {
  TempDir d;
  write_synthetic_model(preset("tiny-qwen3"), d / "a", 3);
  write_synthetic_model(preset("tiny-qwen3"), d / "b", 3);
  write_synthetic_model(preset("tiny-qwen3"), d / "c", 4);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    EXPECT_EQ(read_file(d / "a" / f), read_file(d / "b" / f)) << f;
  EXPECT_NE(read_file(d / "a" / "model.safetensors"), read_file(d / "c" / "model.safetensors"));
  EXPECT_EQ(read_file(d / "a" / "tokenizer.json"), read_file(d / "c" / "tokenizer.json"));
}

// Statistics the oracle tests rely on: gains near 1, projections with std
// about 1/sqrt(fan_in), biases present and non-trivial, tensors distinct.
TEST(Synth, WeightDistributions) {
  TempDir d;
  ModelConfig c = preset("qwen2.5-0.5b");
  c.vocab_size = 4096;  // full width, small file
  write_synthetic_model(c, d / "m", 1, 1);
  ModelDir m = load_model_dir(d / "m");
  auto stats = [&](const std::string& n) {
    auto v = m.weights.get(n).to_f32_vector();
    double sum = 0, sq = 0, mx = 0;
    for (float x : v) sum += x, sq += double(x) * x, mx = std::max(mx, std::fabs(double(x)));
    double mean = sum / v.size();
    return std::array<double, 3>{mean, std::sqrt(sq / v.size() - mean * mean), mx};
  };
  auto norm = stats("model.layers.0.input_layernorm.weight");
  EXPECT_NEAR(norm[0], 1.0, 0.02);
  EXPECT_LE(norm[2], 1.21);
  auto q = stats("model.layers.0.self_attn.q_proj.weight");  // fan_in 896
  EXPECT_NEAR(q[0], 0.0, 0.002);
  EXPECT_NEAR(q[1], 1.0 / std::sqrt(896.0), 0.002);
  auto bias = stats("model.layers.0.self_attn.k_proj.bias");
  EXPECT_GT(bias[1], 0.2);
  auto emb = stats("model.embed_tokens.weight");
  EXPECT_NEAR(emb[1], 4.0 / std::sqrt(3.0 * 896.0), 0.003);
  EXPECT_NE(m.weights.get("model.layers.0.self_attn.k_proj.weight").to_f32_vector(),
            m.weights.get("model.layers.0.self_attn.v_proj.weight").to_f32_vector());
}

TEST(Synth, LayerOverrideAndOddHeads) {
  TempDir d;
  ModelConfig c = preset("smollm2-135m");
  c.vocab_size = 4096;  // keeps the test fast under ASan; widths are the real ones
  write_synthetic_model(c, d / "m", 1, 1);
  ModelDir m = load_model_dir(d / "m");
  EXPECT_EQ(m.config.num_layers, 1);
  EXPECT_EQ(m.config.num_heads, 9);
  EXPECT_EQ(m.weights.get(m.config, WeightRole::q_proj, 0).shape(), (Shape{576, 576}));
  expect_error<UsageError>([&] { write_synthetic_model(preset("tiny"), d / "x", 1, 0); },
                           {"--layers"});
}

TEST(Synth, SpecialTokenIds) {
  auto ids = [](const char* name) {
    ModelConfig c = synthetic_config(preset(name), std::nullopt);
    return std::pair{c.bos_token_ids.at(0), c.eos_token_ids.at(0)};
  };
  EXPECT_EQ(ids("llama-3.2-1b"), (std::pair<int64_t, int64_t>{128000, 128001}));
  EXPECT_EQ(ids("qwen3-0.6b"), (std::pair<int64_t, int64_t>{151643, 151645}));
  EXPECT_EQ(ids("qwen2.5-0.5b"), (std::pair<int64_t, int64_t>{151643, 151643}));
  // SmolLM2's 1/2 and 0/0 would collide with byte tokens.
  EXPECT_EQ(ids("smollm2-1.7b"), (std::pair<int64_t, int64_t>{510, 511}));
  EXPECT_EQ(ids("smollm2-135m"), (std::pair<int64_t, int64_t>{510, 510}));
  EXPECT_EQ(ids("tiny"), (std::pair<int64_t, int64_t>{510, 511}));
  ModelConfig small = preset("tiny");
  small.vocab_size = 300;
  expect_error<ConfigError>([&] { synthetic_config(small, std::nullopt); },
                            {"vocab_size 300", "512"});
}

// tokenizer.json must be a valid HF byte-level BPE: every merge joins two
// existing tokens into the next new one, specials are added tokens with the
// config's ids, and BOS is added by TemplateProcessing.
TEST(Synth, TokenizerJsonStructure) {
  auto j = nlohmann::json::parse(synthetic_tokenizer_json(128000, 128001));
  const auto& model = j.at("model");
  EXPECT_EQ(model.at("type"), "BPE");
  const auto& vocab = model.at("vocab");
  ASSERT_EQ(vocab.size(), static_cast<size_t>(kSynthVocabSize - 2));
  std::set<int64_t> ids;
  for (const auto& [tok, id] : vocab.items()) ids.insert(id.get<int64_t>());
  EXPECT_EQ(ids.size(), vocab.size());
  EXPECT_EQ(*ids.rbegin(), kSynthVocabSize - 3);
  EXPECT_EQ(vocab.at("\xC4\xA0"), 32);  // "Ġ" is the space byte
  EXPECT_EQ(vocab.at("a"), 'a');
  const auto& merges = model.at("merges");
  ASSERT_EQ(merges.size(), static_cast<size_t>(kSynthMerges));
  for (size_t k = 0; k < merges.size(); ++k) {
    std::string m = merges[k];
    auto sp = m.find(' ');
    ASSERT_NE(sp, std::string::npos) << m;
    std::string a = m.substr(0, sp), b = m.substr(sp + 1);
    ASSERT_TRUE(vocab.contains(a) && vocab.contains(b) && vocab.contains(a + b)) << m;
    EXPECT_EQ(vocab.at(a + b), static_cast<int64_t>(kSynthBaseTokens + k)) << m;
    EXPECT_LT(vocab.at(a).get<int64_t>(), vocab.at(a + b).get<int64_t>());
  }
  EXPECT_NE(std::find(merges.begin(), merges.end(), "\xC4\xA0 t"), merges.end());
  const auto& added = j.at("added_tokens");
  ASSERT_EQ(added.size(), 2u);
  EXPECT_EQ(added[0].at("content"), "<|begin_of_text|>");
  EXPECT_EQ(added[0].at("id"), 128000);
  EXPECT_EQ(added[1].at("id"), 128001);
  EXPECT_TRUE(added[1].at("special"));
  EXPECT_EQ(j.at("pre_tokenizer").at("type"), "ByteLevel");
  EXPECT_EQ(j.at("decoder").at("type"), "ByteLevel");
  const auto& post = j.at("post_processor");
  EXPECT_EQ(post.at("type"), "TemplateProcessing");
  EXPECT_EQ(post.at("special_tokens").at("<|begin_of_text|>").at("ids")[0], 128000);
  auto shared = nlohmann::json::parse(synthetic_tokenizer_json(151643, 151643));
  ASSERT_EQ(shared.at("added_tokens").size(), 1u);
  EXPECT_EQ(shared.at("added_tokens")[0].at("content"), "<|endoftext|>");
}

// The synthetic tokenizer through tessera's own tokenizer: BOS prepended,
// frequent corpus words are single tokens, decode inverts encode.
TEST(Synth, TokenizerEncodesWithTesseraTokenizer) {
  TempDir d;
  write_synthetic_model(preset("tiny"), d / "m", 1);
  Tokenizer tok = Tokenizer::from_file(d / "m" / "tokenizer.json");
  EXPECT_EQ(tok.vocab_size(), kSynthVocabSize);
  const std::string text = "Once upon a time the light was burning. 12 \xF0\x9F\x99\x82 caf\xC3\xA9";
  auto ids = tok.encode(text);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 510);
  EXPECT_LT(ids.size(), text.size() / 2);  // merges learned from the corpus apply
  for (int32_t id : ids) EXPECT_LT(id, kSynthVocabSize);
  EXPECT_EQ(tok.decode(std::span(ids).subspan(1)), text);
  EXPECT_TRUE(tok.token_to_id("\xC4\xA0the").has_value());
}

TEST(ModelDirLoad, MissingDirectoryAndConfig) {
  TempDir d;
  expect_error<FileError>([&] { load_model_dir(d / "nope"); }, {(d / "nope").string()});
  expect_error<FileError>([&] { load_model_dir(d.path()); }, {"config.json"});
}

TEST(ModelDirLoad, ConfigAndWeightsDisagree) {
  TempDir d;
  write_synthetic_model(preset("tiny"), d / "m", 1, 2);
  auto cfg = nlohmann::json::parse(read_file(d / "m" / "config.json"));
  cfg["num_hidden_layers"] = 3;
  testing::write_file(d / "m" / "config.json", cfg.dump());
  expect_error<TensorError>([&] { load_model_dir(d / "m"); },
                            {"missing", "model.layers.2."});
  cfg["num_hidden_layers"] = 1;
  testing::write_file(d / "m" / "config.json", cfg.dump());
  expect_error<TensorError>([&] { load_model_dir(d / "m"); }, {"unexpected", "model.layers.1."});
  cfg.erase("vocab_size");
  testing::write_file(d / "m" / "config.json", cfg.dump());
  expect_error<ConfigError>([&] { load_model_dir(d / "m"); }, {"vocab_size", "config.json"});
}

}  // namespace
}  // namespace tessera::model
