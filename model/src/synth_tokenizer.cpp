// The synthetic model's own tokenizer: byte-level BPE in Hugging Face's
// tokenizer.json layout, with merges learned (deterministically) from a short
// embedded English text so that common words encode to few tokens.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/model/synth.h"

namespace tessera::model {
namespace {

// Original text written for this purpose; its only job is word statistics.
constexpr const char* kCorpus =
    "Once upon a time there was a small town by the sea. The people of the town worked "
    "on the boats, and in the evening they sat by the water and told stories. One of the "
    "stories was about a lighthouse that stood on the rocks at the end of the harbour. "
    "The keeper of the lighthouse was an old woman who knew the name of every ship that "
    "came into the harbour. She said that the light was the heart of the town, and that "
    "as long as the light was burning, the town would be safe. Every night she climbed "
    "the stairs to the top of the tower, and every morning she came down again to sleep. "
    "The children of the town liked to visit her, because she had a cat, a garden and a "
    "box full of maps. She showed them the roads of the sea and the names of the stars, "
    "and she told them how the ships found their way home in the dark. When the weather "
    "was bad, the wind was loud and the waves were high, but the light was always there. "
    "One winter the storm was stronger than any storm before. The boats were still out "
    "on the water when the night came. The people of the town stood on the shore and "
    "looked for the light, and for a long time they could see nothing. Then the light "
    "came on, brighter than ever, and one by one the boats came home. In the morning the "
    "children ran to the lighthouse to thank the keeper. They found her in the garden "
    "with her cat, and she was smiling. It was a long night, she said, but the light is "
    "not mine alone. It belongs to everyone who is looking for a way home. After that "
    "day the people of the town took turns to help her, and when she was too old to "
    "climb the stairs, the children kept the light burning. They still do, and the "
    "stories are still told in the evening by the water. The model reads the text and "
    "learns the words that come after other words. It is a simple machine: it takes a "
    "number for every word, it adds and multiplies the numbers in many layers, and it "
    "gives a new number for the next word. Here are some more words that people write "
    "every day: the time, the day, the year, the world, the house, the school, the "
    "family, the water, the light, the name, the number, the people, the question, the "
    "answer, the work, the place, the story, the reason, the example, the problem. We "
    "can say that the quick brown fox jumps over the lazy dog, and that the dog does not "
    "mind. In 2024 there were 365 days and 12 months, and the year before had 365 days "
    "too. Please write the answer in one line, then explain the answer in two lines.";

// GPT-2's reversible byte -> printable code point map (ByteLevel's alphabet).
std::vector<std::string> byte_alphabet() {
  std::vector<int> cps(256, -1);
  for (int b = '!'; b <= '~'; ++b) cps[b] = b;
  for (int b = 0xA1; b <= 0xAC; ++b) cps[b] = b;
  for (int b = 0xAE; b <= 0xFF; ++b) cps[b] = b;
  int next = 256;
  for (int b = 0; b < 256; ++b)
    if (cps[b] < 0) cps[b] = next++;
  std::vector<std::string> out(256);
  for (int b = 0; b < 256; ++b) {
    int cp = cps[b];
    std::string& s = out[b];
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {  // all code points here are < 0x800: two UTF-8 bytes
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

enum class CharClass { letter, digit, space, other };
CharClass classify(unsigned char ch) {
  if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) return CharClass::letter;
  if (ch >= '0' && ch <= '9') return CharClass::digit;
  if (ch == ' ' || ch == '\n') return CharClass::space;
  return CharClass::other;
}

// Pieces as GPT-2's regex would cut ASCII text: an optional leading space
// glued to a run of one class.
std::map<std::string, int> word_counts(const std::string& text) {
  std::map<std::string, int> counts;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    if (text[i] == ' ' && i + 1 < text.size() && classify(text[i + 1]) != CharClass::space) ++i;
    CharClass cls = classify(static_cast<unsigned char>(text[i]));
    while (i < text.size() && classify(static_cast<unsigned char>(text[i])) == cls) ++i;
    ++counts[text.substr(start, i - start)];
  }
  return counts;
}

struct Bpe {
  std::vector<std::string> tokens;  // id -> token string (byte-level alphabet)
  std::vector<std::pair<int, int>> merges;
};

// Classic BPE training: repeatedly merge the most frequent adjacent pair
// (ties -> smallest id pair, so the result never depends on hash order).
Bpe train(const std::string& text, int64_t n_merges) {
  Bpe bpe;
  bpe.tokens = byte_alphabet();
  std::map<std::string, int> by_string;
  for (int i = 0; i < 256; ++i) by_string[bpe.tokens[i]] = i;
  std::vector<std::pair<std::vector<int>, int>> words;
  for (const auto& [w, n] : word_counts(text)) {
    std::vector<int> ids;
    for (unsigned char ch : w) ids.push_back(ch);
    words.push_back({ids, n});
  }
  while (static_cast<int64_t>(bpe.merges.size()) < n_merges) {
    std::map<std::pair<int, int>, int> pairs;
    for (const auto& [ids, n] : words)
      for (size_t k = 0; k + 1 < ids.size(); ++k) pairs[{ids[k], ids[k + 1]}] += n;
    std::pair<int, int> best{-1, -1};
    int best_n = 0;
    for (const auto& [p, n] : pairs)  // map order: first max wins = smallest pair
      if (n > best_n && !by_string.count(bpe.tokens[p.first] + bpe.tokens[p.second]))
        best = p, best_n = n;
    TESSERA_CHECK(best_n > 0, "synthetic tokenizer corpus yields only {} merges",
                  bpe.merges.size());
    int id = static_cast<int>(bpe.tokens.size());
    bpe.tokens.push_back(bpe.tokens[best.first] + bpe.tokens[best.second]);
    by_string[bpe.tokens.back()] = id;
    bpe.merges.push_back(best);
    for (auto& [ids, n] : words) {
      std::vector<int> merged;
      for (size_t k = 0; k < ids.size(); ++k) {
        if (k + 1 < ids.size() && ids[k] == best.first && ids[k + 1] == best.second) {
          merged.push_back(id);
          ++k;
        } else {
          merged.push_back(ids[k]);
        }
      }
      ids = std::move(merged);
    }
  }
  return bpe;
}

nlohmann::ordered_json added_token(int64_t id, const std::string& content) {
  return {{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},   {"normalized", false}, {"special", true}};
}

nlohmann::ordered_json byte_level(bool add_prefix_space) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", true},
          {"use_regex", true}};
}

nlohmann::ordered_json template_processing(const std::string& bos, int64_t bos_id) {
  using oj = nlohmann::ordered_json;
  oj special = {{"SpecialToken", {{"id", bos}, {"type_id", 0}}}};
  auto seq = [](const char* id, int type) { return oj{{"Sequence", {{"id", id}, {"type_id", type}}}}; };
  return {{"type", "TemplateProcessing"},
          {"single", oj::array({special, seq("A", 0)})},
          {"pair", oj::array({special, seq("A", 0), special, seq("B", 1)})},
          {"special_tokens",
           {{bos, {{"id", bos}, {"ids", oj::array({bos_id})}, {"tokens", oj::array({bos})}}}}}};
}

}  // namespace

std::string synthetic_tokenizer_json(int64_t bos_id, int64_t eos_id) {
  using oj = nlohmann::ordered_json;
  static const Bpe bpe = train(kCorpus, kSynthMerges);
  oj vocab = oj::object();
  for (size_t i = 0; i < bpe.tokens.size(); ++i) vocab[bpe.tokens[i]] = i;
  oj merges = oj::array();
  for (const auto& [a, b] : bpe.merges) merges.push_back(bpe.tokens[a] + " " + bpe.tokens[b]);
  const bool shared = bos_id == eos_id;
  const std::string bos = shared ? "<|endoftext|>" : "<|begin_of_text|>";
  oj added = oj::array({added_token(bos_id, bos)});
  if (!shared) added.push_back(added_token(eos_id, "<|end_of_text|>"));
  if (!shared && eos_id < bos_id) std::swap(added[0], added[1]);  // HF lists by id
  oj model = {{"type", "BPE"},           {"dropout", nullptr},
              {"unk_token", nullptr},    {"continuing_subword_prefix", nullptr},
              {"end_of_word_suffix", nullptr}, {"fuse_unk", false},
              {"byte_fallback", false},  {"ignore_merges", false},
              {"vocab", vocab},          {"merges", merges}};
  oj tok = {{"version", "1.0"},
            {"truncation", nullptr},
            {"padding", nullptr},
            {"added_tokens", added},
            {"normalizer", nullptr},
            {"pre_tokenizer", byte_level(false)},
            {"post_processor", template_processing(bos, bos_id)},
            {"decoder", byte_level(true)},
            {"model", model}};
  return tok.dump(2) + "\n";
}

}  // namespace tessera::model
