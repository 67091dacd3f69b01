// config.json parsing, presets and the tensor table. The JSON literals are
// modelled on the published config.json of each model.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "tessera/core/error.h"
#include "tessera/model/config.h"
#include "tessera/model/tensor_table.h"

namespace tessera::model {
namespace {

using nlohmann::json;
using testing::expect_error;

const char* kLlama32_1B = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";

const char* kQwen25_05B = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936})";

const char* kQwen3_06B = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

const char* kSmolLM2_135M = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576,
  "initializer_range": 0.041666666666666664, "intermediate_size": 1536,
  "is_llama_config": true, "max_position_embeddings": 8192, "model_type": "llama",
  "num_attention_heads": 9, "num_hidden_layers": 30, "num_key_value_heads": 3,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_interleaved": false, "rope_scaling": null,
  "rope_theta": 100000, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1", "use_cache": true, "vocab_size": 49152})";

// Mistral-7B-v0.3: v0.2 and later set sliding_window null (v0.1 had 4096).
const char* kMistral7Bv03 = R"({
  "architectures": ["MistralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.42.0.dev0",
  "use_cache": true, "vocab_size": 32768})";

ModelConfig parse(const char* text) { return parse_config(json::parse(text), "test/config.json"); }

void expect_same_as_preset(const char* text, const std::string& name) {
  ModelConfig c = parse(text);
  c.name = name;
  EXPECT_EQ(c, preset(name)) << name;
}

TEST(Config, Llama32_1B) {
  ModelConfig c = parse(kLlama32_1B);
  EXPECT_EQ(c.traits.family, "llama");
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.gqa_group(), 4);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.tie_word_embeddings);
  ASSERT_EQ(c.rope_scaling.type, RopeScaling::Type::llama3);
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{128000});
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{128001});
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.parameter_count(), 1235814400);
  expect_same_as_preset(kLlama32_1B, "llama-3.2-1b");
}

TEST(Config, Qwen25DerivesHeadDimAndHasBias) {
  ModelConfig c = parse(kQwen25_05B);
  EXPECT_EQ(c.traits.family, "qwen2");
  EXPECT_EQ(c.head_dim, 64);  // 896 / 14: no head_dim key
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::none);
  expect_same_as_preset(kQwen25_05B, "qwen2.5-0.5b");
}

TEST(Config, Qwen3HasQkNormAndDecoupledHeadDim) {
  ModelConfig c = parse(kQwen3_06B);
  EXPECT_EQ(c.traits.family, "qwen3");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.q_dim(), 2048);
  EXPECT_NE(c.q_dim(), c.hidden_size);
  expect_same_as_preset(kQwen3_06B, "qwen3-0.6b");
}

TEST(Config, SmolLM2OddHeadCount) {
  ModelConfig c = parse(kSmolLM2_135M);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.gqa_group(), 3);
  expect_same_as_preset(kSmolLM2_135M, "smollm2-135m");
}

TEST(Config, MistralWithoutWindowIsTheLlamaBlock) {
  ModelConfig c = parse(kMistral7Bv03);
  EXPECT_EQ(c.traits.family, "mistral");
  EXPECT_EQ(c.head_dim, 128);  // derived: hidden / heads
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.default_context(), 4096);
  EXPECT_NO_THROW(c.check_context(32768));
  expect_same_as_preset(kMistral7Bv03, "mistral-7b");
  // The same tensors as a Llama of that shape.
  ModelConfig as_llama = c;
  as_llama.traits = arch_traits("LlamaForCausalLM");
  const auto mine = tensor_specs(c), llama = tensor_specs(as_llama);
  ASSERT_EQ(mine.size(), llama.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_EQ(mine[i].name, llama[i].name);
    EXPECT_EQ(mine[i].shape, llama[i].shape);
  }
}

// MistralConfig defaults the window to 4096 when the key is absent; a window
// at least as long as the context cannot bind and is accepted; a shorter one
// is refused, and so is asking a longer context of an accepted one.
TEST(Config, MistralSlidingWindowBindsOnlyBelowTheContext) {
  json j = json::parse(kMistral7Bv03);
  j.erase("sliding_window");
  ModelConfig c = parse_config(j, "v01/config.json");
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_NO_THROW(c.check_context(4096));
  expect_error<UnsupportedError>([&] { c.check_context(4097); }, {"sliding_window 4096", "4097"});
  EXPECT_EQ(parse_config(config_to_json(c), "again").sliding_window, 4096);

  j["sliding_window"] = 16;
  expect_error<UnsupportedError>([&] { parse_config(j, "w16/config.json"); },
                                 {"w16/config.json", "sliding_window 16", "4096"});
  j["max_position_embeddings"] = 16;  // the whole context fits in the window
  EXPECT_EQ(parse_config(j, "w16/config.json").default_context(), 16);
  j["sliding_window"] = -1;
  expect_error<ConfigError>([&] { parse_config(j, "neg/config.json"); }, {"sliding_window"});
  // Qwen2's window only applies with use_sliding_window (refused); Llama has none.
  EXPECT_EQ(parse(kQwen25_05B).sliding_window, 0);
}

TEST(Config, HeadDimDefaultsFollowTransformers) {
  json j = json::parse(kQwen3_06B);
  j.erase("head_dim");
  j["hidden_size"] = 2560;  // Qwen3Config defaults head_dim to 128, not hidden/heads
  EXPECT_EQ(parse_config(j).head_dim, 128);
  json l = json::parse(kLlama32_1B);
  l.erase("head_dim");
  EXPECT_EQ(parse_config(l).head_dim, 2048 / 32);
  l["head_dim"] = 80;  // explicit wins
  EXPECT_EQ(parse_config(l).head_dim, 80);
}

TEST(Config, DefaultsForOmittedKeys) {
  json j = json::parse(kLlama32_1B);
  for (const char* k : {"num_key_value_heads", "rope_theta", "rms_norm_eps",
                        "tie_word_embeddings", "max_position_embeddings", "bos_token_id"})
    j.erase(k);
  ModelConfig c = parse_config(j);
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_TRUE(c.bos_token_ids.empty());
}

TEST(Config, RopeScalingSpellings) {
  json j = json::parse(kLlama32_1B);
  j["rope_scaling"].erase("rope_type");
  j["rope_scaling"]["type"] = "llama3";  // legacy key, copied by transformers
  EXPECT_EQ(parse_config(j).rope_scaling.type, RopeScaling::Type::llama3);
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(parse_config(j).rope_scaling.type, RopeScaling::Type::none);
  j["rope_scaling"] = nullptr;
  EXPECT_EQ(parse_config(j).rope_scaling.type, RopeScaling::Type::none);
  // transformers >= 4.56 nests theta and scaling under rope_parameters.
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["rope_parameters"] = json::parse(kLlama32_1B)["rope_scaling"];
  j["rope_parameters"]["rope_theta"] = 500000.0;
  ModelConfig c = parse_config(j);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
}

TEST(Config, RopeScalingRejections) {
  json j = json::parse(kLlama32_1B);
  j["rope_scaling"]["rope_type"] = "yarn";
  expect_error<UnsupportedError>([&] { parse_config(j, "x/config.json"); },
                                 {"x/config.json", "yarn", "llama3"});
  j = json::parse(kLlama32_1B);
  j["rope_scaling"].erase("low_freq_factor");
  expect_error<ConfigError>([&] { parse_config(j); }, {"low_freq_factor"});
  j = json::parse(kLlama32_1B);
  j["rope_scaling"]["high_freq_factor"] = 0.5;
  expect_error<ConfigError>([&] { parse_config(j); }, {"high_freq_factor"});
}

TEST(Config, TokenIdsIntListOrNull) {
  json j = json::parse(kLlama32_1B);
  j["eos_token_id"] = {128001, 128008, 128009};
  j["bos_token_id"] = nullptr;
  ModelConfig c = parse_config(j);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_TRUE(c.bos_token_ids.empty());
  j["eos_token_id"] = 200000;
  expect_error<ConfigError>([&] { parse_config(j); }, {"eos_token_id", "200000"});
  j["eos_token_id"] = "x";
  expect_error<ConfigError>([&] { parse_config(j); }, {"eos_token_id", "integer"});
}

TEST(Config, DtypeKeySpellings) {
  json j = json::parse(kQwen3_06B);
  j.erase("torch_dtype");
  j["dtype"] = "float32";
  EXPECT_EQ(parse_config(j).torch_dtype, "float32");
}

TEST(Config, MissingRequiredFieldNamesFieldAndFile) {
  for (const char* field : {"hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "vocab_size", "architectures"}) {
    json j = json::parse(kQwen3_06B);
    j.erase(field);
    expect_error<ConfigError>([&] { parse_config(j, "dir/config.json"); },
                              {field, "dir/config.json", "missing"});
  }
}

TEST(Config, UnknownArchitectureListsSupported) {
  json j = json::parse(kQwen3_06B);
  j["architectures"] = {"MixtralForCausalLM"};
  expect_error<UnsupportedError>([&] { parse_config(j); },
                                 {"MixtralForCausalLM", "LlamaForCausalLM", "Qwen2ForCausalLM",
                                  "Qwen3ForCausalLM", "MistralForCausalLM"});
}

TEST(Config, ValidateRejectsInconsistentShapes) {
  json j = json::parse(kQwen3_06B);
  j["num_key_value_heads"] = 3;
  expect_error<ConfigError>([&] { parse_config(j); }, {"num_key_value_heads", "16", "3"});
  j = json::parse(kQwen3_06B);
  j["hidden_size"] = 0;
  expect_error<ConfigError>([&] { parse_config(j); }, {"hidden_size", "positive"});
  j = json::parse(kQwen3_06B);
  j["head_dim"] = 63;
  expect_error<ConfigError>([&] { parse_config(j); }, {"head_dim", "63"});
}

// A corrupted size is refused at parse time, before anything is sized from it
// (issue 13: num_hidden_layers 1e9 made inspect allocate 21.9 GB).
TEST(Config, AbsurdSizesAreRejectedBeforeAllocation) {
  for (const char* field : {"num_hidden_layers", "hidden_size", "intermediate_size", "vocab_size",
                            "max_position_embeddings", "num_attention_heads"}) {
    json j = json::parse(kQwen3_06B);
    j[field] = 1000000000;
    if (std::string(field) == "num_attention_heads") j["num_key_value_heads"] = 1000000000;
    expect_error<ConfigError>([&] { parse_config(j); }, {field, "1000000000", "exceeds the limit"});
  }
  json j = json::parse(kQwen3_06B);
  j["num_hidden_layers"] = kMaxLayers;  // the limit itself is allowed
  EXPECT_EQ(parse_config(j).num_layers, kMaxLayers);
}

// Found by fuzz/replay (safetensors header): nlohmann reports a number that
// overflows a double as out_of_range, not parse_error; it must still be the
// typed error of a malformed file, not an internal one (exit 70).
TEST(Config, NumberOverflowIsAConfigError) {
  testing::TempDir d;
  testing::write_file(d / "config.json", R"({"architectures": ["LlamaForCausalLM"], "rms_norm_eps": 1e309})");
  expect_error<ConfigError>([&] { load_config(d / "config.json"); }, {"config.json", "invalid JSON"});
}

TEST(Config, UnmodelledFeaturesAreRejected) {
  json j = json::parse(kQwen3_06B);
  j["attention_bias"] = true;  // would give o_proj a bias too
  expect_error<UnsupportedError>([&] { parse_config(j); }, {"attention_bias"});
  j = json::parse(kLlama32_1B);
  j["hidden_act"] = "gelu";
  expect_error<UnsupportedError>([&] { parse_config(j); }, {"hidden_act", "gelu"});
  j = json::parse(kQwen25_05B);
  j["use_sliding_window"] = true;
  expect_error<UnsupportedError>([&] { parse_config(j); }, {"use_sliding_window"});
  j = json::parse(kQwen25_05B);
  j["attention_bias"] = false;  // Qwen2 ignores the key: its q/k/v always have a bias
  EXPECT_TRUE(parse_config(j).qkv_bias);
}

TEST(Config, IntegralFloatsAreIntegers) {
  json j = json::parse(kLlama32_1B);
  j["max_position_embeddings"] = 131072.0;
  EXPECT_EQ(parse_config(j).max_position_embeddings, 131072);
  j["num_hidden_layers"] = 16.5;
  expect_error<ConfigError>([&] { parse_config(j); }, {"num_hidden_layers", "integer"});
}

TEST(Config, JsonRoundTripForEveryPreset) {
  for (const auto& name : preset_names()) {
    ModelConfig p = preset(name);
    ModelConfig back = parse_config(config_to_json(p), name);
    EXPECT_EQ(back, p) << name;
  }
}

TEST(Config, UnknownPresetListsNames) {
  expect_error<UsageError>([] { preset("llama-9b"); }, {"llama-9b", "qwen3-4b", "tiny"});
}

// models.md, transcribed independently of presets.cpp.
struct Published {
  const char* name;
  int64_t layers, hidden, ffn, heads, kv, head_dim, vocab;
  double theta, eps;
  bool qkv_bias, qk_norm, llama3;
};
constexpr Published kPublished[] = {
    {"llama-3.2-1b", 16, 2048, 8192, 32, 8, 64, 128256, 5e5, 1e-5, false, false, true},
    {"llama-3.2-3b", 28, 3072, 8192, 24, 8, 128, 128256, 5e5, 1e-5, false, false, true},
    {"smollm2-1.7b", 24, 2048, 8192, 32, 32, 64, 49152, 1.3e5, 1e-5, false, false, false},
    {"smollm2-135m", 30, 576, 1536, 9, 3, 64, 49152, 1e5, 1e-5, false, false, false},
    {"qwen2.5-0.5b", 24, 896, 4864, 14, 2, 64, 151936, 1e6, 1e-6, true, false, false},
    {"qwen2.5-1.5b", 28, 1536, 8960, 12, 2, 128, 151936, 1e6, 1e-6, true, false, false},
    {"qwen2.5-3b", 36, 2048, 11008, 16, 2, 128, 151936, 1e6, 1e-6, true, false, false},
    {"qwen3-0.6b", 28, 1024, 3072, 16, 8, 128, 151936, 1e6, 1e-6, false, true, false},
    {"qwen3-1.7b", 28, 2048, 6144, 16, 8, 128, 151936, 1e6, 1e-6, false, true, false},
    {"qwen3-4b", 36, 2560, 9728, 32, 8, 128, 151936, 1e6, 1e-6, false, true, false},
};

TEST(Presets, MatchPublishedShapes) {
  for (const auto& p : kPublished) {
    SCOPED_TRACE(p.name);
    ModelConfig c = preset(p.name);
    EXPECT_NO_THROW(c.validate());
    EXPECT_EQ(c.num_layers, p.layers);
    EXPECT_EQ(c.hidden_size, p.hidden);
    EXPECT_EQ(c.intermediate_size, p.ffn);
    EXPECT_EQ(c.num_heads, p.heads);
    EXPECT_EQ(c.num_kv_heads, p.kv);
    EXPECT_EQ(c.head_dim, p.head_dim);
    EXPECT_EQ(c.vocab_size, p.vocab);
    EXPECT_EQ(c.rope_theta, p.theta);
    EXPECT_EQ(c.rms_norm_eps, p.eps);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(c.qkv_bias, p.qkv_bias);
    EXPECT_EQ(c.qk_norm, p.qk_norm);
    EXPECT_EQ(c.rope_scaling.type == RopeScaling::Type::llama3, p.llama3);
    EXPECT_FALSE(c.bos_token_ids.empty());
    EXPECT_FALSE(c.eos_token_ids.empty());
  }
  // + tiny, tiny-qwen3, mistral-7b (checked against its config.json above)
  EXPECT_EQ(preset_names().size(), std::size(kPublished) + 3);
}

TEST(Presets, ParameterCounts) {
  // models.md for llama-3.2-1b: layer matrices + embedding; the 2 x 16 + 1
  // RMSNorm gains of 2048 make up the rest.
  EXPECT_EQ(preset("llama-3.2-1b").parameter_count(), 973078528 + 262668288 + 33 * 2048);
  EXPECT_EQ(preset("llama-3.2-1b").parameter_count(), 1235814400);
  EXPECT_EQ(preset("qwen2.5-0.5b").parameter_count(), 494032768);
  EXPECT_EQ(preset("qwen3-0.6b").parameter_count(), 596049920);
}

TEST(TensorTable, RolesFollowTraits) {
  ModelConfig q2 = preset("qwen2.5-0.5b"), q3 = preset("tiny-qwen3"), l = preset("tiny");
  EXPECT_EQ(tensor_name(q2, WeightRole::q_bias, 3), "model.layers.3.self_attn.q_proj.bias");
  EXPECT_EQ(tensor_name(q3, WeightRole::k_norm, 1), "model.layers.1.self_attn.k_norm.weight");
  EXPECT_EQ(tensor_name(q3, WeightRole::lm_head), "lm_head.weight");
  // A tied head is the embedding.
  EXPECT_EQ(tensor_name(l, WeightRole::lm_head), "model.embed_tokens.weight");
  EXPECT_THROW(tensor_name(l, WeightRole::q_bias, 0), InternalError);
  EXPECT_THROW(tensor_name(q3, WeightRole::q_norm, 2), InternalError);
  EXPECT_THROW(tensor_name(q3, WeightRole::final_norm, 0), InternalError);

  auto specs = tensor_specs(q3);
  // embed + 2 layers x (norm, q, k, v, o, q_norm, k_norm, norm, gate, up, down) + norm + head
  ASSERT_EQ(specs.size(), 1u + 2 * 11 + 2);
  EXPECT_EQ(specs.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(specs.back().name, "lm_head.weight");
  for (const auto& s : specs) {
    if (s.role == WeightRole::q_proj) {
      EXPECT_EQ(s.shape, (Shape{256, 128}));
    }
    if (s.role == WeightRole::o_proj) {
      EXPECT_EQ(s.shape, (Shape{128, 256}));
    }
    if (s.role == WeightRole::k_norm) {
      EXPECT_EQ(s.shape, (Shape{64}));
    }
    if (s.role == WeightRole::down_proj) {
      EXPECT_EQ(s.shape, (Shape{128, 384}));
    }
  }
  EXPECT_EQ(tensor_specs(q2).size(), 1u + 24 * 12 + 1);  // biases, no head
}

}  // namespace
}  // namespace tessera::model
