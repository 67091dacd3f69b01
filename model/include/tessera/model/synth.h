#pragma once
// Synthetic models: a complete Hugging Face directory (config.json,
// model.safetensors in bf16, tokenizer.json) with seeded weights, so every
// shape, including full-size 1B-4B presets, can be exercised without
// downloads. Same config + seed -> same bytes.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "tessera/model/config.h"

namespace tessera::model {

// The synthetic tokenizer: 256 byte tokens, kSynthMerges merges learned from a
// small embedded English text, and two special tokens (BOS, EOS; one shared
// token when a config uses the same id for both).
inline constexpr int64_t kSynthBaseTokens = 256;
inline constexpr int64_t kSynthMerges = 254;
inline constexpr int64_t kSynthVocabSize = kSynthBaseTokens + kSynthMerges + 2;  // 512

// The config actually written: layers overridden, and bos/eos moved onto the
// tokenizer's special tokens. A config's own ids are kept when they lie above
// the BPE vocabulary (Llama-3 128000/128001, Qwen 151643/151645); ids that
// would collide with BPE tokens (SmolLM2 0/1/2) become 510/511. Throws
// ConfigError when vocab_size cannot hold the tokenizer, UsageError for a
// non-positive layer override.
ModelConfig synthetic_config(const ModelConfig& c, std::optional<int64_t> layers_override);

// HF tokenizer.json text (byte-level BPE, ByteLevel pre-tokenizer and decoder,
// TemplateProcessing adding BOS) whose specials have the given ids. Token ids
// in [kSynthVocabSize - 2, vocab_size) other than the specials exist in the
// model but not in the tokenizer: they decode to nothing.
std::string synthetic_tokenizer_json(int64_t bos_id, int64_t eos_id);

// Writes config.json, model.safetensors (bf16) and tokenizer.json into `out`
// (created if needed). config.json is written last, so an interrupted run
// never leaves a directory that loads.
void write_synthetic_model(const ModelConfig& c, const std::filesystem::path& out, uint64_t seed,
                           std::optional<int64_t> layers_override = std::nullopt);

}  // namespace tessera::model
