// Without libFuzzer (gcc builds): runs a fuzz target over every file of the
// directories or files given, so the seed corpus and every crash ever found
// are regression cases of the ordinary test run (release and ASan/UBSan);
// with --mutations N, also over N deterministic mutants (a fixed seed), the
// short fixed-run smoke CI affords. Mutations are byte-level (flip, set,
// insert, erase, duplicate) and JSON-aware (a number replaced by an extreme
// one, a string by an odd one), since a random byte mostly breaks the JSON
// parse before the parser under test runs. Coverage-guided runs: bench/fuzz.sh.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::string;

struct Rng {  // splitmix64: the same mutants on every machine
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }
};

const char* const kNumbers[] = {"0", "-1", "1", "2", "3", "7", "255", "256", "65535", "65536", "2147483647",
                                "2147483648", "-2147483648", "4294967296", "9007199254740993",
                                "18446744073709551615", "1e308", "1e309", "-1e309", "0.5", "1.5", "-0.0",
                                "1000000000", "[]", "{}", "null", "true", "\"1\""};
const char* const kStrings[] = {"\"\"", "\"\\u0000\"", "\"\\ud800\"", "\"\xff\xfe\"", "\"BF16\"", "\"F32\"",
                                "\"Q4\"", "\"llama3\"", "\"Sequence\"", "\"BPE\"", "\"ByteLevel\"", "1", "null",
                                "[]", "{\"type\": \"Split\"}"};

// Start and end of the i-th maximal run of characters in `set` (or npos).
std::pair<size_t, size_t> nth_run(const Bytes& b, const char* set, size_t i) {
  size_t pos = 0, k = 0;
  while ((pos = b.find_first_of(set, pos)) != Bytes::npos) {
    const size_t end = std::min(b.find_first_not_of(set, pos), b.size());
    if (k++ == i) return {pos, end};
    pos = end;
  }
  return {Bytes::npos, 0};
}

Bytes mutate(const Bytes& seed, const std::vector<Bytes>& all, Rng& r) {
  Bytes b = seed;
  const size_t edits = 1 + r.below(3);
  for (size_t e = 0; e < edits; ++e) {
    const size_t at = r.below(b.size() + 1);
    switch (r.below(8)) {
      case 0: if (!b.empty()) b[r.below(b.size())] ^= static_cast<char>(1u << r.below(8)); break;
      case 1: if (!b.empty()) b[r.below(b.size())] = static_cast<char>(r.next()); break;
      case 2: b.insert(at, 1, static_cast<char>(r.next())); break;
      case 3: b.erase(at, r.below(16)); break;
      case 4: b.insert(at, b.substr(r.below(b.size() + 1), r.below(64))); break;
      case 5: {  // splice with another input
        const Bytes& o = all[r.below(all.size())];
        b = b.substr(0, at) + o.substr(std::min(o.size(), r.below(o.size() + 1)));
        break;
      }
      case 6: {  // a number -> an extreme value
        auto [s, t] = nth_run(b, "-0123456789.eE+", r.below(64));
        if (s != Bytes::npos) b.replace(s, t - s, kNumbers[r.below(std::size(kNumbers))]);
        break;
      }
      default: {  // a string -> an odd one
        const auto [s, t] = nth_run(b, "\"", r.below(64));
        const size_t close = s == Bytes::npos ? Bytes::npos : b.find('"', t);
        if (close != Bytes::npos) b.replace(s, close + 1 - s, kStrings[r.below(std::size(kStrings))]);
      }
    }
  }
  return b;
}

// The input being run, written to crash-replay.bin if it brings the process
// down (abort or a fatal signal), to be added to the seed corpus once fixed.
const Bytes* g_current = nullptr;

extern "C" void save_and_reraise(int sig) {
  if (g_current) {
    const int fd = ::open("crash-replay.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      (void)!::write(fd, g_current->data(), g_current->size());
      ::close(fd);
    }
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void run(const Bytes& b) {
  g_current = &b;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(b.data()), b.size());
  g_current = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, save_and_reraise);
  std::vector<fs::path> files;
  size_t mutations = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mutations") == 0 && i + 1 < argc) {
      mutations = std::stoul(argv[++i]);
    } else if (fs::is_directory(argv[i])) {
      for (const auto& e : fs::recursive_directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.emplace_back(argv[i]);
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "replay: no inputs\n");
    return 2;
  }
  std::vector<Bytes> seeds;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    run(seeds.back());
  }
  Rng r{0x13};
  for (size_t i = 0; i < mutations; ++i) {
    const Bytes m = mutate(seeds[i % seeds.size()], seeds, r);
    run(m);
  }
  std::printf("replay: %zu inputs and %zu mutants ok\n", seeds.size(), mutations);
  return 0;
}
