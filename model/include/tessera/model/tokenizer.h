#pragma once
// Byte-level BPE tokenizer read from a Hugging Face tokenizer.json, structured as
// huggingface/tokenizers structures it (STYLE.md #10): added tokens, normalizer,
// pre-tokenizer, BPE model, post-processor, decoder. It must give exactly the ids
// of the Rust `tokenizers` library; tests/model/tokenizer_conformance_test.cpp
// checks that on the real Llama-3, Qwen3 and GPT-2 files.
//
// Input text that is not valid UTF-8 is first repaired the way Rust's
// String::from_utf8_lossy (and Python's bytes.decode(errors="replace")) repairs
// it: every maximal invalid subsequence becomes one U+FFFD. HF's Python binding
// only accepts str, so this is what a caller handing it such bytes gets.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tessera::model {

namespace tok {
struct TokenizerImpl;
}

// An entry of tokenizer.json "added_tokens": matched in the raw text before
// pre-tokenization, never split by BPE.
struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;  // only match when not inside a word
  bool lstrip = false;       // also swallow whitespace on the left
  bool rstrip = false;       // also swallow whitespace on the right
  bool normalized = false;   // match in normalized text rather than raw text
  bool special = false;      // dropped by decode(skip_special_tokens = true)
};

class Tokenizer {
 public:
  // Both throw TokenizerError (FileError if the file cannot be read) naming the
  // file and the offending field.
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);
  static Tokenizer from_json(const nlohmann::json& j, const std::string& source_name);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Ids with no token decode to nothing, as in HF: a model may have more
  // embedding rows than its tokenizer has tokens.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // One past the largest id of the model vocab or the added tokens.
  int64_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // TokenizerError if no such id
  bool is_special(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const;
  // One line for `tessera inspect`: model, sizes and pipeline stages.
  std::string summary() const;
  const std::string& source_name() const;

 private:
  explicit Tokenizer(std::shared_ptr<const tok::TokenizerImpl> impl);
  std::shared_ptr<const tok::TokenizerImpl> impl_;
};

}  // namespace tessera::model
