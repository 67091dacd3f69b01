#pragma once
// The stages of a tokenizer.json pipeline, one class family per HF module
// (tokenizers/src/{normalizers,pre_tokenizers,models/bpe,processors,decoders}).
// Internal to model/: callers use tessera/model/tokenizer.h.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/model/tokenizer.h"

namespace tessera::model::tok {

using nlohmann::json;

// ---- UTF-8 and the GPT-2 byte <-> printable-char table (tokenizer_utf8.cpp) ----
bool is_valid_utf8(std::string_view s);
// Rust from_utf8_lossy: each maximal invalid subsequence becomes U+FFFD.
std::string to_valid_utf8(std::string_view s);
// Decodes the code point at s[i] of valid UTF-8; advances i.
char32_t next_code_point(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t cp);
bool is_unicode_whitespace(char32_t cp);  // Rust char::is_whitespace
// Byte-level alphabet: byte b -> UTF-8 of the printable char GPT-2 assigns it.
const std::array<std::string, 256>& byte_level_alphabet();
std::string byte_level_encode(std::string_view bytes);
// Bytes of a token whose chars are all in the alphabet; nullopt otherwise.
std::optional<std::string> byte_level_decode(std::string_view token);

// Transparent hashing so maps keyed by std::string accept string_view lookups.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// ---- PCRE2 regex (tokenizer_regex.cpp) ----
// Compiled with UTF|UCP and JIT. Subjects must already be valid UTF-8: matching
// skips PCRE2's per-call UTF check, which would otherwise make iterating over
// the matches of one long subject quadratic.
class Regex {
 public:
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Calls f(begin, end) for every non-empty match, left to right.
  void find_all(std::string_view s, const std::function<void(size_t, size_t)>& f) const;
  bool matches_anywhere(std::string_view s) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  std::string where_;
  void* code_ = nullptr;  // pcre2_code_8*, kept opaque so PCRE2 stays private
};

// ---- Normalizers (tokenizer_normalizer.cpp) ----
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string_view s) const = 0;
  virtual std::string name() const = 0;
};
// null -> nullptr; unknown types -> TokenizerError naming the type.
std::unique_ptr<Normalizer> make_normalizer(const json& j, const std::string& where);

// ---- Pre-tokenizers (tokenizer_pretokenizer.cpp) ----
// Pieces of one text segment; pre-tokenizers refine them, dropping empty ones
// as HF's PreTokenizedString::split does.
using Pieces = std::vector<std::string>;
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(Pieces& pieces) const = 0;
  virtual std::string name() const = 0;
};
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const std::string& where);

// ---- BPE model (tokenizer_bpe.cpp) ----
class BpeModel {
 public:
  BpeModel(const json& model, const std::string& where);
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;  // nullptr if absent
  int64_t size() const { return static_cast<int64_t>(vocab_.size()); }
  int64_t id_limit() const { return static_cast<int64_t>(tokens_.size()); }
  size_t merge_count() const { return merge_count_; }
  bool ignore_merges() const { return ignore_merges_; }

 private:
  // Merges live in an open-addressing table: at 100k-300k merges the lookup
  // is a cache miss either way, and one probe beats a node-based map's chain.
  struct MergeSlot {
    uint64_t key = kEmptyKey;
    int32_t rank = 0;
    int32_t new_id = 0;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};  // ids are >= 0, so never a real pair
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const MergeSlot* find_merge(int32_t a, int32_t b) const;
  MergeSlot& merge_slot(uint64_t key);
  void load_vocab(const json& vocab, const std::string& where);
  void load_merges(const json& merges, const std::string& where);
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  std::vector<int32_t> initial_symbols(std::string_view word) const;

  TokenMap vocab_;
  std::vector<std::string> tokens_;  // by id; "" where an id has no token
  std::vector<bool> has_id_;
  std::vector<MergeSlot> merge_table_;
  size_t merge_count_ = 0;
  // Id of every code point below kCharTable that is a token by itself (-1
  // otherwise): the first step of every word, without hashing strings.
  static constexpr char32_t kCharTable = 0x400;
  std::vector<int32_t> char_ids_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::string prefix_;  // continuing_subword_prefix
  std::string suffix_;  // end_of_word_suffix
  // Words recur constantly in text; HF keeps the same kind of bounded cache.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

// ---- Added tokens (tokenizer_added.cpp) ----
struct Segment {
  std::string text;  // empty when id is set
  int32_t id = -1;   // >= 0: an added token
};
class AddedVocabulary {
 public:
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);
  // Splits s on the added tokens whose `normalized` flag equals `normalized`
  // (leftmost-longest, as HF's aho-corasick matcher), appending to out.
  void split(std::string_view s, bool normalized, std::vector<Segment>& out) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* find(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view content) const;

 private:
  struct Trie {
    std::vector<std::array<int32_t, 256>> next;  // node -> child per byte (0 = none)
    std::vector<int32_t> token;                  // node -> index into tokens_ or -1
    int32_t add_node();
  };
  size_t longest_match(const Trie& t, std::string_view s, size_t at, int32_t& tok) const;
  bool word_boundary_ok(std::string_view s, size_t b, size_t e) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  TokenMap by_content_;
  Trie raw_, norm_;
  std::unique_ptr<Regex> word_end_, word_start_;  // only if a token is single_word
};

// ---- Post-processors (tokenizer_postprocessor.cpp) ----
class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
  virtual std::string name() const = 0;
};
// id_exists lets TemplateProcessing reject special-token ids with no token.
std::unique_ptr<PostProcessor> make_post_processor(const json& j, const std::string& where,
                                                   const std::function<bool(int32_t)>& id_exists);

// ---- Decoders (tokenizer_decoder.cpp) ----
class Decoder {
 public:
  virtual ~Decoder() = default;
  // HF's decode_chain: tokens in, pieces out; the caller concatenates.
  virtual std::vector<std::string> decode_chain(std::vector<std::string> tokens) const = 0;
  virtual std::string name() const = 0;
};
std::unique_ptr<Decoder> make_decoder(const json& j, const std::string& where);

// ---- JSON field helpers shared by the stage factories ----
const json& field(const json& j, const char* key, const std::string& where);
bool flag(const json& j, const char* key, bool dflt, const std::string& where);
std::string type_of(const json& j, const std::string& where);

// Every stage kind has a Sequence type; these two serve all of them.
template <class Part>
std::string sequence_name(const std::vector<std::unique_ptr<Part>>& parts) {
  std::string n = "Sequence[";
  for (size_t i = 0; i < parts.size(); ++i) n += (i ? ", " : "") + parts[i]->name();
  return n + "]";
}
// Builds the parts listed in j[key] with make(json, where), skipping nulls.
template <class Part, class Make>
std::vector<std::unique_ptr<Part>> sequence_parts(const json& j, const char* key,
                                                  const std::string& where, Make make) {
  const json& list = field(j, key, where);
  if (!list.is_array()) throw TokenizerError(where + ": '" + key + "' must be an array");
  std::vector<std::unique_ptr<Part>> parts;
  for (size_t i = 0; i < list.size(); ++i)
    if (auto p = make(list[i], where + "." + key + "[" + std::to_string(i) + "]"))
      parts.push_back(std::move(p));
  return parts;
}

// ---- The assembled pipeline (tokenizer.cpp) ----
struct TokenizerImpl {
  std::string source;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  std::unique_ptr<AddedVocabulary> added;
  int64_t vocab_size = 0;
};

}  // namespace tessera::model::tok
