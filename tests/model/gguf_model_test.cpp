// GGUF files as models: tiny llama (GQA, q/k permuted by the converter),
// qwen2 (q/k/v biases) and qwen3 (qk-norm, decoupled head_dim) files written the way llama.cpp's
// converter writes them (tools/reference/make_gguf_model_fixtures.py) from the
// oracle fixture models must load as those same models: config, every tensor
// (F16-rounded, q/k rows back in HF order) and the tokenizer.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "tessera/core/bf16.h"
#include "tessera/model/gguf_model.h"
#include "tessera/model/model_dir.h"
#include "tessera/model/synth.h"
#include "tessera/model/tensor_table.h"

namespace tessera::model {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
const fs::path kData = fs::path(TESSERA_TEST_DATA);

struct Pair {
  const char* gguf;
  const char* oracle_dir;
};

class GgufModel : public ::testing::TestWithParam<Pair> {};

TEST_P(GgufModel, LoadsAsTheModelItWasConvertedFrom) {
  const ModelDir g = load_model(kData / "gguf" / GetParam().gguf);
  const ModelDir hf = load_model_dir(kData / "oracle" / GetParam().oracle_dir);
  const ModelConfig &a = g.config, &b = hf.config;
  EXPECT_EQ(a.traits, b.traits);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);  // f32 in the file, shortest decimal back
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  // Every tensor bit for bit: 2-D weights were stored F16, norms F32.
  for (const auto& s : tensor_specs(a)) {
    const std::vector<float> got = g.weights.get(s.name).to_f32_vector();
    const std::vector<float> want = hf.weights.get(s.name).to_f32_vector();
    ASSERT_EQ(got.size(), want.size()) << s.name;
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const float w = s.shape.size() == 2 ? f16_to_f32(f32_to_f16(want[i])) : want[i];
      bad += std::memcmp(&got[i], &w, 4) != 0;
    }
    EXPECT_EQ(bad, 0u) << s.name << ": " << bad << " of " << got.size() << " elements differ";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufModel,
                         ::testing::Values(Pair{"llama_gqa.gguf", "llama_gqa_rope3_tied"},
                                           Pair{"qwen3_qknorm.gguf", "qwen3_qknorm_gqa_tied"},
                                           Pair{"qwen2_bias.gguf", "qwen2_bias_hd80_tied"}),
                         [](const auto& p) { return std::string(p.param.oracle_dir); });

TEST(GgufModel, UnpermuteRestoresRotaryHalves) {
  // One head of 4 rows: the converter stores HF rows (0, 2, 1, 3) as (0, 1, 2, 3).
  const Tensor t = Tensor::from_f32({8, 1}, std::vector<float>{0, 2, 1, 3, 10, 12, 11, 13});
  EXPECT_EQ(unpermute_qk_rows(t, 2).to_f32_vector(),
            (std::vector<float>{0, 1, 2, 3, 10, 11, 12, 13}));
}

TEST(GgufModel, TokenizerFromMetadataEncodesAsItsTokenizerJson) {
  const Tokenizer g = load_tokenizer(kData / "gguf/llama_gqa.gguf");
  const Tokenizer hf = Tokenizer::from_json(nlohmann::json::parse(synthetic_tokenizer_json(510, 511)),
                                            "synthetic");
  for (const char* text : {"Once upon a time, there was a little girl.", "  spaces\tand\nlines ",
                           "caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac", "<|begin_of_text|>hi<|end_of_text|>",
                           "it's 2024!"}) {
    EXPECT_EQ(g.encode(text, true), hf.encode(text, true)) << text;
    EXPECT_EQ(g.decode(g.encode(text, false)), text);
  }
  EXPECT_TRUE(g.is_special(510));
  const nlohmann::json cfg = gguf_tokenizer_config_json(GgufFile::open(kData / "gguf/llama_gqa.gguf"));
  EXPECT_EQ(cfg.at("chat_template"), "{{ messages }}");
  EXPECT_EQ(cfg.at("bos_token"), "<|begin_of_text|>");
  EXPECT_EQ(cfg.at("add_bos_token"), true);
}

// The fixture with `from` replaced by `to` (same length) everywhere.
fs::path patched(const testing::TempDir& dir, const std::string& from, const std::string& to) {
  std::string bytes = testing::read_file(kData / "gguf/llama_gqa.gguf");
  for (size_t at = bytes.find(from); at != std::string::npos; at = bytes.find(from, at))
    bytes.replace(at, from.size(), to);
  testing::write_file(dir / "m.gguf", bytes);
  return dir / "m.gguf";
}

TEST(GgufModel, NamesWhatItCannotMap) {
  testing::TempDir dir;
  expect_error<UnsupportedError>([&] { load_model(patched(dir, "llama", "llamb")); },
                                 {"m.gguf", "'llamb'", "supported: llama, qwen2, qwen3"});
  expect_error<TensorError>([&] { load_model(patched(dir, "blk.1.ffn_up", "blk.1.ffn_uq")); },
                            {"m.gguf", "'blk.1.ffn_uq.weight'", "maps to no"});
  expect_error<UnsupportedError>([&] { load_tokenizer(patched(dir, "gpt2", "gpt3")); },
                                 {"m.gguf", "tokenizer.ggml.model 'gpt3'", "gpt2"});
}

TEST(GgufModel, ConvertWritesAnHfDirectory) {
  testing::TempDir dir;
  convert_gguf(kData / "gguf/qwen3_qknorm.gguf", dir / "hf");
  const ModelDir m = load_model_dir(dir / "hf");
  const ModelDir g = load_model(kData / "gguf/qwen3_qknorm.gguf");
  EXPECT_EQ(m.config.num_layers, g.config.num_layers);
  for (const auto& s : tensor_specs(m.config)) {
    ASSERT_EQ(m.weights.get(s.name).dtype(), DType::bf16) << s.name;
    EXPECT_EQ(m.weights.get(s.name).to_f32_vector(),
              g.weights.get(s.name).to(DType::bf16).to_f32_vector())
        << s.name;
  }
  const Tokenizer t = load_tokenizer(dir / "hf");
  EXPECT_EQ(t.encode("hello there"), load_tokenizer(kData / "gguf/qwen3_qknorm.gguf").encode("hello there"));
  std::ifstream cfg(dir / "hf/tokenizer_config.json");
  EXPECT_EQ(nlohmann::json::parse(cfg).at("chat_template"), "{{ messages }}");
}

}  // namespace
}  // namespace tessera::model
