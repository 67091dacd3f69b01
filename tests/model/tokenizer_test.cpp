// Unit tests on small hand-made tokenizer.json files: BPE merge order,
// ignore_merges, UTF-8 repair, added-token and id lookups, long inputs,
// concurrency, and one test per malformed file with the error it must give.
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/model/synth.h"
#include "tessera/model/tokenizer.h"
#include "tessera/model/tokenizer_parts.h"

namespace {

using nlohmann::json;
using tessera::TokenizerError;
using tessera::model::Tokenizer;
namespace tok = tessera::model::tok;

// gmock is not linked into the layer test executables.
::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// A byte-level BPE over the 256-char alphabet plus `extra` merges.
json tiny(const std::vector<std::string>& merges, bool ignore_merges = false) {
  json vocab = json::object();
  int32_t id = 0;
  for (const auto& ch : tok::byte_level_alphabet()) vocab[ch] = id++;
  for (const auto& m : merges) {
    std::string merged = m;
    merged.erase(merged.find(' '), 1);
    if (!vocab.contains(merged)) vocab[merged] = id++;
  }
  return {{"model",
           {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges},
            {"ignore_merges", ignore_merges}}},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"added_tokens",
           json::array({{{"id", id}, {"content", "<eos>"}, {"special", true},
                         {"normalized", false}},
                        {{"id", id + 1}, {"content", "<tool>"}, {"special", false},
                         {"normalized", false}}})}};
}

std::vector<std::string> tokens_of(const Tokenizer& t, std::string_view text) {
  std::vector<std::string> out;
  for (int32_t id : t.encode(text)) out.push_back(t.id_to_token(id));
  return out;
}

TEST(Tokenizer, LowestRankMergesFirst) {
  auto ab_first = Tokenizer::from_json(tiny({"a b", "b c"}), "t");
  EXPECT_EQ(tokens_of(ab_first, "abc"), (std::vector<std::string>{"ab", "c"}));
  auto bc_first = Tokenizer::from_json(tiny({"b c", "a b"}), "t");
  EXPECT_EQ(tokens_of(bc_first, "abc"), (std::vector<std::string>{"a", "bc"}));
}

TEST(Tokenizer, EqualRanksMergeLeftmostFirstAndChain) {
  auto t = Tokenizer::from_json(tiny({"a a", "aa a"}), "t");
  // a a a a a -> aa a a a -> aa aa a (rank 0 first) -> aa aaa.
  EXPECT_EQ(tokens_of(t, "aaaaa"), (std::vector<std::string>{"aa", "aaa"}));
  EXPECT_EQ(tokens_of(t, "aaa"), (std::vector<std::string>{"aaa"}));
}

TEST(Tokenizer, IgnoreMergesTakesWholeWordsFromTheVocab) {
  json j = tiny({"a b"}, true);
  j["model"]["vocab"]["xyz"] = 999;  // reachable by no merge
  EXPECT_EQ(tokens_of(Tokenizer::from_json(j, "t"), "xyz"), (std::vector<std::string>{"xyz"}));
  j["model"]["ignore_merges"] = false;
  EXPECT_EQ(tokens_of(Tokenizer::from_json(j, "t"), "xyz"),
            (std::vector<std::string>{"x", "y", "z"}));
}

TEST(Tokenizer, MergesInBothFormats) {
  json j = tiny({"a b"});
  j["model"]["merges"] = json::array({json::array({"a", "b"})});
  EXPECT_EQ(tokens_of(Tokenizer::from_json(j, "t"), "ab"), (std::vector<std::string>{"ab"}));
}

TEST(Tokenizer, AddedTokensSplitBeforePreTokenization) {
  auto t = Tokenizer::from_json(tiny({"a b"}), "t");
  EXPECT_EQ(tokens_of(t, "ab<eos>ab<tool><eos"),
            (std::vector<std::string>{"ab", "<eos>", "ab", "<tool>", "<", "e", "o", "s"}));
  const int32_t eos = *t.token_to_id("<eos>");
  EXPECT_TRUE(t.is_special(eos));
  EXPECT_FALSE(t.is_special(eos + 1));
  EXPECT_FALSE(t.is_special(0));
  std::vector<int32_t> ids = t.encode("ab<eos><tool>");
  EXPECT_EQ(t.decode(ids), "ab<eos><tool>");
  EXPECT_EQ(t.decode(ids, true), "ab<tool>");
  EXPECT_EQ(t.vocab_size(), eos + 2);
}

TEST(Tokenizer, LookupsAndOutOfRangeIds) {
  auto t = Tokenizer::from_json(tiny({"a b"}), "tiny.json");
  EXPECT_EQ(t.id_to_token(*t.token_to_id("ab")), "ab");
  EXPECT_FALSE(t.token_to_id("zzz"));
  EXPECT_THROW(t.id_to_token(-1), TokenizerError);
  EXPECT_THROW(t.id_to_token(static_cast<int32_t>(t.vocab_size())), TokenizerError);
  // Ids past the tokenizer decode to nothing, as HF's decode drops them.
  std::vector<int32_t> ids{*t.token_to_id("ab"), 1 << 20, -3, *t.token_to_id("c")};
  EXPECT_EQ(t.decode(ids), "abc");
  try {
    t.id_to_token(1 << 20);
    FAIL() << "id_to_token of an unknown id must throw";
  } catch (const TokenizerError& e) {
    EXPECT_TRUE(contains(e.what(), "tiny.json: no token with id 1048576"));
  }
  EXPECT_TRUE(contains(t.summary(), "1 merges"));
}

// Expected strings are Python's bytes.decode("utf-8", errors="replace").
TEST(TokenizerUtf8, RepairsLikeFromUtf8Lossy) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(tok::to_valid_utf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(tok::to_valid_utf8("a\x80z"), "a" + fffd + "z");
  EXPECT_EQ(tok::to_valid_utf8("\xF0\x9F\x98"), fffd);                // truncated 4-byte
  EXPECT_EQ(tok::to_valid_utf8("\xE2\x82" "A"), fffd + "A");         // truncated 3-byte
  EXPECT_EQ(tok::to_valid_utf8("\xC0\xAF"), fffd + fffd);            // overlong
  EXPECT_EQ(tok::to_valid_utf8("\xED\xA0\x80"), fffd + fffd + fffd);  // surrogate
  EXPECT_EQ(tok::to_valid_utf8("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // > U+10FFFF
  EXPECT_EQ(tok::to_valid_utf8("\xFF\xFE"), fffd + fffd);
  EXPECT_TRUE(tok::is_valid_utf8("\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(tok::is_valid_utf8("\xF4\x90\x80\x80"));
}

TEST(TokenizerUtf8, InvalidInputEncodesAsItsRepair) {
  auto t = Tokenizer::from_json(tiny({"a b"}), "t");
  EXPECT_EQ(t.encode("ab\xFF\xC3"), t.encode("ab\xEF\xBF\xBD\xEF\xBF\xBD"));
  EXPECT_EQ(t.decode(t.encode("x\x80y")), "x\xEF\xBF\xBDy");
}

TEST(TokenizerUtf8, ByteLevelAlphabetRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(tok::byte_level_decode(tok::byte_level_encode(all)), all);
  EXPECT_EQ(tok::byte_level_alphabet()[' '], "\xC4\xA0");  // 'Ġ'
  EXPECT_FALSE(tok::byte_level_decode("\xE4\xB8\xAD"));     // U+4E2D is not in the alphabet
}

// Long runs of one character class are where a regex tokenizer goes
// quadratic or overflows a JIT stack; each must still split as HF does.
TEST(Tokenizer, LongRunsDoNotBlowUp) {
  auto t = Tokenizer::from_json(tiny({"Ġ Ġ"}), "t");
  std::string text = std::string(100000, ' ') + "x" + std::string(100000, 'a') +
                     std::string(50000, '7') + std::string(20000, '\n');
  auto ids = t.encode(text);
  EXPECT_EQ(t.decode(ids), text);
  // 99999 spaces -> pairs of "ĠĠ" (first pre-token), then " x", the letters,
  // the digits and the newline run, one token per byte apart from the pairs.
  EXPECT_EQ(ids.size(), 49999u + 1 + 2 + 100000 + 50000 + 20000);
}

TEST(Tokenizer, ConcurrentEncodesAgree) {
  auto t = Tokenizer::from_json(tiny({"a b", "ab c", "Ġ abc"}), "t");
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "abc ab a" + std::to_string(i % 17) + " ";
  const auto want = t.encode(text);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (auto& g : got) threads.emplace_back([&] { g = t.encode(text); });
  for (auto& th : threads) th.join();
  for (auto& g : got) EXPECT_EQ(g, want);
}

TEST(Tokenizer, NormalizerForms) {
  json j = tiny({});
  j["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(Tokenizer::from_json(j, "t").encode("e\xCC\x81"),
            Tokenizer::from_json(j, "t").encode("\xC3\xA9"));
  j["normalizer"] = {{"type", "NFKD"}};
  EXPECT_EQ(Tokenizer::from_json(j, "t").decode(Tokenizer::from_json(j, "t").encode("\xEF\xAC\x81")),
            "fi");  // U+FB01 ligature
}

// The synthetic models' tokenizer (model/synth.h) is standard HF format.
TEST(Tokenizer, ReadsTheSyntheticModelsTokenizer) {
  auto t = Tokenizer::from_json(json::parse(tessera::model::synthetic_tokenizer_json(128000, 128001)),
                                "synth");
  EXPECT_EQ(t.vocab_size(), 128002);
  auto ids = t.encode("The weather is nice today.");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 128000);  // TemplateProcessing BOS
  EXPECT_TRUE(t.is_special(128000));
  EXPECT_LT(ids.size(), 20u);  // merges apply: fewer tokens than bytes
  EXPECT_EQ(t.decode(ids, true), "The weather is nice today.");
  EXPECT_EQ(t.encode("The weather", false).front(), t.encode("The weather", true)[1]);
}

TEST(Tokenizer, FromFileAcceptsDirectoryAndReportsBadFiles) {
  auto dir = std::filesystem::temp_directory_path() / "tessera_tokenizer_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tiny({"a b"}).dump();
  EXPECT_EQ(Tokenizer::from_file(dir).encode("ab").size(), 1u);
  EXPECT_THROW(Tokenizer::from_file(dir / "absent.json"), tessera::FileError);
  std::ofstream(dir / "broken.json") << "{\"model\": ";
  EXPECT_THROW(Tokenizer::from_file(dir / "broken.json"), TokenizerError);
  std::filesystem::remove_all(dir);
}

// ---- malformed tokenizer.json: each gives a TokenizerError naming the problem ----

struct BadCase {
  const char* name;
  std::function<void(json&)> edit;
  const char* message;
};

class TokenizerBadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(TokenizerBadInput, GivesSpecificError) {
  json j = tiny({"a b", "ab c"});
  GetParam().edit(j);
  try {
    Tokenizer::from_json(j, "bad.json");
    FAIL() << "expected TokenizerError containing: " << GetParam().message;
  } catch (const TokenizerError& e) {
    EXPECT_TRUE(contains(e.what(), "bad.json")) << e.what();
    EXPECT_TRUE(contains(e.what(), GetParam().message)) << e.what();
  }
}

const json kTemplateBos = {
    {"type", "TemplateProcessing"},
    {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                            {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
    {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {5}}, {"tokens", {"<s>"}}}}}}};

INSTANTIATE_TEST_SUITE_P(
    Cases, TokenizerBadInput,
    ::testing::Values(
        BadCase{"merge_unknown_token", [](json& j) { j["model"]["merges"].push_back("ab q\xC4\xA0x"); },
                "merges[2]: merge 'ab q\xC4\xA0x' names unknown token 'q\xC4\xA0x'"},
        BadCase{"merge_result_not_in_vocab", [](json& j) { j["model"]["merges"].push_back("c a"); },
                "merge 'c a' produces 'ca', which is not in the vocab"},
        BadCase{"merge_not_a_pair", [](json& j) { j["model"]["merges"].push_back("abc"); },
                "merge 'abc' is not two tokens separated by one space"},
        BadCase{"merge_repeated", [](json& j) { j["model"]["merges"].push_back("a b"); },
                "merges[2]: merge 'a b' repeats merge 0"},
        BadCase{"missing_model", [](json& j) { j.erase("model"); }, "missing 'model'"},
        BadCase{"unknown_model_type", [](json& j) { j["model"]["type"] = "WordPiece"; },
                "unsupported model type 'WordPiece'"},
        BadCase{"missing_vocab", [](json& j) { j["model"].erase("vocab"); },
                "model: missing field 'vocab'"},
        BadCase{"duplicate_vocab_id", [](json& j) { j["model"]["vocab"]["zz"] = 3; },
                "duplicate id 3"},
        BadCase{"negative_vocab_id", [](json& j) { j["model"]["vocab"]["zz"] = -4; },
                "id -4 of token 'zz' is outside"},
        BadCase{"bad_regex",
                [](json& j) {
                  j["pre_tokenizer"] = {{"type", "Split"},
                                        {"pattern", {{"Regex", "(\\p{L}+"}}},
                                        {"behavior", "Isolated"}};
                },
                "bad regex /(\\p{L}+/ at offset 7: missing closing parenthesis"},
        BadCase{"unknown_split_behavior",
                [](json& j) {
                  j["pre_tokenizer"] = {
                      {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Glued"}};
                },
                "unknown split behavior 'Glued'"},
        BadCase{"unknown_pre_tokenizer", [](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; },
                "unsupported pre_tokenizer type 'Whitespace'"},
        BadCase{"unknown_normalizer", [](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; },
                "unsupported normalizer type 'Lowercase'"},
        BadCase{"unknown_decoder", [](json& j) { j["decoder"] = {{"type", "WordPiece"}}; },
                "unsupported decoder type 'WordPiece'"},
        BadCase{"unknown_post_processor",
                [](json& j) { j["post_processor"] = {{"type", "RobertaProcessing"}}; },
                "unsupported post_processor type 'RobertaProcessing'"},
        BadCase{"template_unknown_special",
                [](json& j) {
                  j["post_processor"] = kTemplateBos;
                  j["post_processor"]["special_tokens"].erase("<s>");
                },
                "special token \"<s>\" is not in special_tokens"},
        BadCase{"template_id_without_token",
                [](json& j) {
                  j["post_processor"] = kTemplateBos;
                  j["post_processor"]["special_tokens"]["<s>"]["ids"] = {123456};
                },
                "special token \"<s>\" has id 123456 with no token"},
        BadCase{"added_duplicate_id",
                [](json& j) { j["added_tokens"][1]["id"] = j["added_tokens"][0]["id"]; },
                "added_tokens[1]: duplicate id"},
        BadCase{"added_id_taken_by_vocab", [](json& j) { j["added_tokens"][0]["id"] = 7; },
                "id 7 of '<eos>' is already the vocab token"},
        BadCase{"added_missing_content", [](json& j) { j["added_tokens"][0].erase("content"); },
                "added_tokens[0]: missing field 'content'"},
        BadCase{"unk_not_in_vocab", [](json& j) { j["model"]["unk_token"] = "<unk>"; },
                "unk_token '<unk>' is not in the vocab"},
        BadCase{"dropout", [](json& j) { j["model"]["dropout"] = 0.1; }, "dropout is not supported"},
        BadCase{"byte_fallback", [](json& j) { j["model"]["byte_fallback"] = true; },
                "byte_fallback BPE is not supported"},
        BadCase{"flag_not_bool", [](json& j) { j["model"]["ignore_merges"] = "yes"; },
                "'ignore_merges' must be true or false"},
        BadCase{"top_level_not_object", [](json& j) { j = json::array(); },
                "top level must be a JSON object"}),
    [](const auto& p) { return std::string(p.param.name); });

}  // namespace
