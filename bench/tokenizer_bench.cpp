// Encoding throughput (MB/s of UTF-8 input) of each real tokenizer.json on
// ~1 MB of text, single thread. tools/reference/time_hf_tokenizers.py builds
// the same two texts and times HF tokenizers on them for comparison.
//   corpus:       tests/data/tokenizer/corpus.jsonl (valid entries) repeated;
//                 words recur, so both implementations' word caches help.
//   random_words: seeded pseudo-random words, almost all distinct: BPE proper.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tessera/model/tokenizer.h"

namespace {

namespace fs = std::filesystem;
constexpr size_t kTargetBytes = 1000000;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string corpus_text() {
  std::string joined;
  std::istringstream in(read_text(fs::path(TESSERA_SOURCE_DIR) / "tests/data/tokenizer/corpus.jsonl"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto e = nlohmann::json::parse(line);
    if (e.contains("text")) joined += e["text"].get<std::string>() + "\n";
  }
  std::string out;
  while (out.size() < kTargetBytes) out += joined;
  return out;
}

// Same generator as time_hf_tokenizers.py (a 31-bit LCG); keep them in step.
std::string random_words_text() {
  const std::string alphabet_utf8 =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789\xC3\xA9\xC3\xBC\xC3\xB1\xC3\x9F"
      "\xE4\xB8\xAD\xE6\x96\x87\xE6\x97\xA5\xE6\x9C\xAC\xF0\x9F\x98\x80";
  std::vector<std::string> alphabet;
  for (size_t i = 0; i < alphabet_utf8.size();) {
    const auto b = static_cast<unsigned char>(alphabet_utf8[i]);
    size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    alphabet.push_back(alphabet_utf8.substr(i, n));
    i += n;
  }
  const char* seps[] = {" ", " ", " ", ", ", ".\n", "\t", "  "};
  uint32_t x = 12345;
  auto rnd = [&x] {
    x = (x * 1103515245u + 12345u) & 0x7fffffffu;
    return x >> 16;
  };
  std::string out;
  while (out.size() < kTargetBytes) {
    uint32_t n = 1 + rnd() % 10;
    for (uint32_t k = 0; k < n; ++k) out += alphabet[rnd() % alphabet.size()];
    out += seps[rnd() % 7];
  }
  return out;
}

const tessera::model::Tokenizer* load(const std::string& name) {
  static std::map<std::string, tessera::model::Tokenizer> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return &it->second;
  fs::path p = fs::path(TESSERA_SOURCE_DIR) / ".cache/tokenizers" / name / "tokenizer.json";
  if (!fs::exists(p)) return nullptr;
  return &cache.emplace(name, tessera::model::Tokenizer::from_file(p)).first->second;
}

void BM_Encode(benchmark::State& state, const std::string& name, const std::string& which) {
  const auto* tok = load(name);
  if (!tok) {
    state.SkipWithError("real tokenizer files missing: run scripts/fetch-tokenizers");
    return;
  }
  static const std::string corpus = corpus_text(), words = random_words_text();
  const std::string& text = which == "corpus" ? corpus : words;
  size_t n = 0;
  for (auto _ : state) {
    auto ids = tok->encode(text, false);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n);
  state.counters["bytes"] = static_cast<double>(text.size());
}

}  // namespace

#define TOKENIZER_BENCH(name, which)                                              \
  BENCHMARK_CAPTURE(BM_Encode, name##_##which, std::string(#name), std::string(#which)) \
      ->Unit(benchmark::kMillisecond)                                             \
      ->MinTime(2.0)
TOKENIZER_BENCH(llama3, corpus);
TOKENIZER_BENCH(llama3, random_words);
TOKENIZER_BENCH(qwen3, corpus);
TOKENIZER_BENCH(qwen3, random_words);
TOKENIZER_BENCH(gpt2, corpus);
TOKENIZER_BENCH(gpt2, random_words);

BENCHMARK_MAIN();
