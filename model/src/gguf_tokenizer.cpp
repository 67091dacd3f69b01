// tokenizer.ggml.* -> the tokenizer.json a Hugging Face checkpoint of the same
// model carries. The vocabulary, merges and special ids are in the metadata;
// the pre-tokenizer is not, only its name (tokenizer.ggml.pre), so the table
// below maps each name to the pre-tokenizer llama.cpp applies for it
// (llama-vocab.cpp), written the way the HF tokenizer.json spells it.
#include <set>

#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/model/gguf_model.h"

namespace tessera::model {
namespace {

using nlohmann::json;

// GPT-2's split regex, used by every ByteLevel pre-tokenizer with use_regex.
json byte_level(bool use_regex, bool trim_offsets = true) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", trim_offsets},
          {"use_regex", use_regex}};
}

json isolated_split(const char* regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"},
          {"invert", false}};
}

struct PreRow {
  std::vector<std::string> names;  // tokenizer.ggml.pre values
  json normalizer;
  json pre_tokenizer;
  bool ignore_merges;
};

const std::vector<PreRow>& pre_rows() {
  static const std::vector<PreRow> rows = {
      {{"gpt2"}, nullptr, byte_level(true), false},
      // StarCoder-style (SmolLM/SmolLM2): every digit on its own, then GPT-2's
      // regex. HF's Digits(individual_digits) splits on char::is_numeric,
      // i.e. an isolated \p{N} split.
      {{"smollm", "starcoder", "refact", "codeshell"},
       nullptr,
       {{"type", "Sequence"},
        {"pretokenizers", {isolated_split("\\p{N}"), byte_level(true)}}},
       false},
      {{"llama-bpe", "llama3"},
       nullptr,
       {{"type", "Sequence"},
        {"pretokenizers",
         {isolated_split("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                         "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|"
                         "\\s+"),
          byte_level(false)}}},
       true},
      {{"qwen2"},
       {{"type", "NFC"}},
       {{"type", "Sequence"},
        {"pretokenizers",
         {isolated_split("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
                         " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
          byte_level(false, false)}}},
       false},
  };
  return rows;
}

const PreRow& pre_row(const GgufFile& f) {
  const std::string pre = f.get_string_opt("tokenizer.ggml.pre").value_or("gpt2");
  std::string known;
  for (const auto& r : pre_rows())
    for (const auto& n : r.names) {
      if (n == pre) return r;
      known += (known.empty() ? "" : ", ") + n;
    }
  throw_error<UnsupportedError>("{}: tokenizer.ggml.pre '{}' is not supported (supported: {})",
                                f.name(), pre, known);
}

// GGUF token types (llama.cpp llama_token_type).
constexpr int64_t kControl = 3, kUserDefined = 4;

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
};

Vocab read_vocab(const GgufFile& f) {
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model != "gpt2")
    throw_error<UnsupportedError>("{}: tokenizer.ggml.model '{}' is not supported (supported: "
                                  "gpt2 byte-level BPE)", f.name(), model);
  Vocab v;
  for (const auto& t : f.get_array("tokenizer.ggml.tokens", GgufValueType::string))
    v.tokens.push_back(t.s);
  v.types.assign(v.tokens.size(), 1);
  if (f.find("tokenizer.ggml.token_type")) {
    const auto& types = f.get_array("tokenizer.ggml.token_type", GgufValueType::i32);
    if (types.size() != v.tokens.size())
      throw_error<GgufError>("{}: tokenizer.ggml.token_type has {} entries for {} tokens",
                             f.name(), types.size(), v.tokens.size());
    for (size_t i = 0; i < types.size(); ++i) v.types[i] = types[i].i;
  }
  return v;
}

std::optional<std::string> special(const GgufFile& f, const Vocab& v, const char* which) {
  const std::string key = std::string("tokenizer.ggml.") + which + "_token_id";
  auto id = f.get_int_opt(key);
  if (!id) return std::nullopt;
  if (*id < 0 || *id >= static_cast<int64_t>(v.tokens.size()))
    throw_error<GgufError>("{}: {} {} is outside the {} tokens", f.name(), key, *id,
                           v.tokens.size());
  return v.tokens[static_cast<size_t>(*id)];
}

json post_processor(const GgufFile& f, const Vocab& v) {
  const bool add_bos = f.get_bool_opt("tokenizer.ggml.add_bos_token").value_or(false);
  const bool add_eos = f.get_bool_opt("tokenizer.ggml.add_eos_token").value_or(false);
  if (!add_bos && !add_eos)
    return {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false},
            {"use_regex", true}};
  json single = json::array(), pair = json::array(), specials = json::object();
  auto add = [&](const char* which, json& list, int type_id) {
    auto tok = special(f, v, which);
    if (!tok)
      throw_error<GgufError>("{}: tokenizer.ggml.add_{}_token is set but tokenizer.ggml.{}_token_id "
                             "is missing", f.name(), which, which);
    list.push_back({{"SpecialToken", {{"id", *tok}, {"type_id", type_id}}}});
    specials[*tok] = {{"id", *tok},
                      {"ids", {*f.get_int_opt(std::string("tokenizer.ggml.") + which + "_token_id")}},
                      {"tokens", {*tok}}};
  };
  for (int seq = 0; seq < 2; ++seq) {
    json& list = seq == 0 ? single : pair;
    for (int part = 0; part <= seq; ++part) {
      if (add_bos) add("bos", list, part);
      list.push_back({{"Sequence", {{"id", part == 0 ? "A" : "B"}, {"type_id", part}}}});
      if (add_eos) add("eos", list, part);
    }
  }
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair},
          {"special_tokens", specials}};
}

}  // namespace

nlohmann::json gguf_tokenizer_json(const GgufFile& f) {
  const Vocab v = read_vocab(f);
  const PreRow& pre = pre_row(f);
  json vocab = json::object(), added = json::array();
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const std::string& t = v.tokens[id];
    if (vocab.contains(t))
      throw_error<TokenizerError>("{}: token '{}' appears twice (ids {} and {})", f.name(), t,
                                  vocab[t].get<int64_t>(), id);
    vocab[t] = id;
    if (v.types[id] == kControl || v.types[id] == kUserDefined)
      added.push_back({{"id", id}, {"content", t}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false},
                       {"special", v.types[id] == kControl}});
  }
  json merges = json::array();
  if (f.find("tokenizer.ggml.merges"))
    for (const auto& m : f.get_array("tokenizer.ggml.merges", GgufValueType::string))
      merges.push_back(m.s);
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", pre.normalizer},
          {"pre_tokenizer", pre.pre_tokenizer},
          {"post_processor", post_processor(f, v)},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true},
                       {"use_regex", true}}},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                     {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                     {"fuse_unk", false}, {"byte_fallback", false},
                     {"ignore_merges", pre.ignore_merges}, {"vocab", vocab},
                     {"merges", merges}}}};
}

nlohmann::json gguf_tokenizer_config_json(const GgufFile& f) {
  const Vocab v = read_vocab(f);
  json j = {{"tokenizer_class", "PreTrainedTokenizerFast"},
            {"clean_up_tokenization_spaces", false},
            {"add_bos_token", f.get_bool_opt("tokenizer.ggml.add_bos_token").value_or(false)},
            {"add_eos_token", f.get_bool_opt("tokenizer.ggml.add_eos_token").value_or(false)}};
  for (const char* which : {"bos", "eos", "unknown", "padding"}) {
    static const std::map<std::string, std::string> kHfName = {
        {"bos", "bos_token"}, {"eos", "eos_token"}, {"unknown", "unk_token"},
        {"padding", "pad_token"}};
    if (auto t = special(f, v, which)) j[kHfName.at(which)] = *t;
  }
  if (auto tmpl = f.get_string_opt("tokenizer.chat_template")) j["chat_template"] = *tmpl;
  const std::string arch = f.get_string_opt("general.architecture").value_or("");
  if (auto ctx = f.get_int_opt(arch + ".context_length")) j["model_max_length"] = *ctx;
  return j;
}

Tokenizer gguf_tokenizer(const GgufFile& f) {
  return Tokenizer::from_json(gguf_tokenizer_json(f), f.name() + " (tokenizer.ggml.*)");
}

}  // namespace tessera::model
