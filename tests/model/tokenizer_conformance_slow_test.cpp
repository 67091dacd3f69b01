// Exact agreement with HF tokenizers (PyPI `tokenizers`, version in
// tools/reference/requirements-tokenizer.txt) on the real Llama-3, Qwen3 and
// GPT-2 tokenizer.json files and on variants of them (tests/data/tokenizer/
// variants.json), over tests/data/tokenizer/corpus.jsonl. The reference ids
// come from tools/reference/make_tokenizer_fixtures.py.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/model/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using tessera::model::Tokenizer;

const fs::path kData = fs::path(TESSERA_TEST_DATA) / "tokenizer";

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// Corpus name -> raw input bytes (hex entries are deliberately invalid UTF-8).
const std::map<std::string, std::string>& corpus() {
  static const std::map<std::string, std::string> c = [] {
    std::map<std::string, std::string> m;
    std::istringstream in(read_text(kData / "corpus.jsonl"));
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      json e = json::parse(line);
      m[e["name"]] = e.contains("hex") ? from_hex(e["hex"]) : e["text"].get<std::string>();
    }
    return m;
  }();
  return c;
}

// The real files are several MB each and not committed; parse each once.
const json* base_json(const std::string& name) {
  static std::map<std::string, json> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return &it->second;
  fs::path p = fs::path(TESSERA_SOURCE_DIR) / ".cache" / "tokenizers" / name / "tokenizer.json";
  if (!fs::exists(p)) return nullptr;
  return &cache.emplace(name, json::parse(read_text(p))).first->second;
}

// Builds the tokenizer a reference file was made with: a real file, or a
// variant = real file + JSON merge patch + appended added tokens.
std::optional<Tokenizer> tokenizer_for(const std::string& name, std::string& missing) {
  json variants = json::parse(read_text(kData / "variants.json"));
  std::string base = name;
  const json* variant = nullptr;
  for (const json& v : variants)
    if (v["name"] == name) variant = &v;
  if (variant) base = (*variant)["base"];
  const json* bj = base_json(base);
  if (!bj) {
    missing = (fs::path(TESSERA_SOURCE_DIR) / ".cache/tokenizers" / base).string();
    return std::nullopt;
  }
  if (!variant) return Tokenizer::from_json(*bj, base);
  json j = *bj;
  j.merge_patch((*variant)["patch"]);
  if (variant->contains("append_added_tokens"))
    for (const json& t : (*variant)["append_added_tokens"]) j["added_tokens"].push_back(t);
  return Tokenizer::from_json(j, name);
}

std::string describe_mismatch(const Tokenizer& tok, const std::vector<int32_t>& got,
                              const std::vector<int32_t>& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  auto show = [&](const std::vector<int32_t>& v) {
    std::string s;
    for (size_t k = i; k < v.size() && k < i + 4; ++k)
      s += std::to_string(v[k]) + "'" + tok.id_to_token(v[k]) + "' ";
    return s;
  };
  return "first difference at index " + std::to_string(i) + " of " + std::to_string(want.size()) +
         ": got " + show(got) + "| want " + show(want);
}

class TokenizerConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerConformance, MatchesHfTokenizersOnCorpus) {
  const std::string name = GetParam();
  json ref = json::parse(read_text(kData / ("reference_" + name + ".json")));
  std::string missing;
  auto tok = tokenizer_for(name, missing);
  ASSERT_TRUE(tok) << missing << "/tokenizer.json is missing: run scripts/fetch-tokenizers "
                   << "(scripts/setup does it) to download the real tokenizer files";
  EXPECT_EQ(tok->vocab_size(), ref["vocab_size"].get<int64_t>());
  ASSERT_EQ(ref["cases"].size(), corpus().size()) << "reference is stale: rerun "
                                                     "tools/reference/make_tokenizer_fixtures.py";
  for (const json& c : ref["cases"]) {
    const std::string& text = corpus().at(c["name"]);
    SCOPED_TRACE(name + " / " + c["name"].get<std::string>());
    auto want = c["ids"].get<std::vector<int32_t>>();
    auto got = tok->encode(text, true);
    EXPECT_EQ(got, want) << describe_mismatch(*tok, got, want);
    auto want_plain = c["ids_no_special"].get<std::vector<int32_t>>();
    auto got_plain = tok->encode(text, false);
    EXPECT_EQ(got_plain, want_plain) << describe_mismatch(*tok, got_plain, want_plain);
    EXPECT_EQ(tok->decode(want, false), c["decoded"].get<std::string>());
    EXPECT_EQ(tok->decode(want, true), c["decoded_skip_special"].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(RealFiles, TokenizerConformance,
                         ::testing::Values("llama3", "qwen3", "gpt2"));
INSTANTIATE_TEST_SUITE_P(Variants, TokenizerConformance,
                         ::testing::Values("gpt2_prefix_space", "llama3_bos", "gpt2_added_flags",
                                           "qwen3_normalized_added", "gpt2_nfkc",
                                           "gpt2_split_behaviors"));

}  // namespace
