// The deployment manifest (pipeline/manifest.h): sha256 of artifacts and when
// they are stale, the chunk-tree digest of big files and its remembered
// digests, and check_deployment's re-check of the verdict chain.
#include <fstream>

#include <unistd.h>

#include <gtest/gtest.h>

#include "pipeline_test_util.h"
#include "tessera/pipeline/manifest.h"

namespace tessera::pipeline {
namespace {

namespace fs = std::filesystem;
using test_util::scratch;
TEST(Manifest, Sha256AndStaleArtifacts) {
  EXPECT_EQ(sha256_text("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const fs::path d = scratch("manifest");
  fs::create_directories(d);
  std::ofstream(d / "a.json") << "{}";
  Manifest m;
  m.record(d, "a.json", 2);
  m.phases[2] = {"passed", {{"options", "x"}}};
  m.save(d);
  Manifest back = Manifest::load(d);
  EXPECT_TRUE(back.stale(d, 2).empty());
  EXPECT_EQ(back.phases.at(2).inputs.at("options"), "x");
  std::ofstream(d / "a.json") << "{\"edited\": 1}";
  ASSERT_EQ(back.stale(d, 2).size(), 1u);
  EXPECT_NE(back.stale(d, 2)[0].find("a.json"), std::string::npos);
  std::ofstream(d / "manifest.json") << "not json";
  std::string problem;
  EXPECT_TRUE(Manifest::load(d, &problem).artifacts.empty());
  EXPECT_FALSE(problem.empty());
}

// A big file's digest is a tree of chunk digests (manifest.h), checked here
// against the definition written out: each chunk's sha256 by sha256_bytes,
// one per line, through sha256 again. Chunks of 64 KiB over a 200 KiB + 3 B
// file (a short last chunk), then a 1 GiB + 1 B sparse file through
// sha256_file itself (its 64 MiB chunks: 16 of zeros and one of one byte).
// A change in any chunk, the last included, changes the digest.
TEST(Manifest, BigFilesAreDigestedAsATreeOfChunks) {
  const fs::path d = scratch("tree");
  fs::create_directories(d);
  const fs::path f = d / "small.bin";
  std::string bytes((size_t{200} << 10) + 3, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 131) % 251);
  auto write = [&] { std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes; };
  auto by_hand = [](const std::string& b, size_t chunk) {
    std::string lines;
    for (size_t at = 0; at < b.size(); at += chunk)
      lines += sha256_bytes(std::as_bytes(std::span(b.data() + at, std::min(chunk, b.size() - at)))) + "\n";
    return sha256_text(lines);
  };
  write();
  const std::string first = sha256_tree(f, 64 << 10);
  EXPECT_EQ(first, by_hand(bytes, 64 << 10));
  EXPECT_NE(first, sha256_bytes(std::as_bytes(std::span(bytes.data(), bytes.size()))));
  for (const size_t at : {size_t{0}, size_t{70000}, bytes.size() - 1}) {
    bytes[at] ^= 1;
    write();
    EXPECT_EQ(sha256_tree(f, 64 << 10), by_hand(bytes, 64 << 10)) << at;
    EXPECT_NE(sha256_tree(f, 64 << 10), first) << at;
    bytes[at] ^= 1;
  }
  const fs::path big = d / "big.bin";
  {
    std::ofstream out(big, std::ios::binary);
    out.seekp(static_cast<std::streamoff>((uint64_t{1} << 30)));
    out.put('x');
  }
  const std::string zeros_chunk(size_t{64} << 20, '\0');
  std::string lines;
  const std::string zero_digest = sha256_bytes(std::as_bytes(std::span(zeros_chunk.data(), zeros_chunk.size())));
  for (int c = 0; c < 16; ++c) lines += zero_digest + "\n";
  lines += sha256_text("x") + "\n";
  EXPECT_EQ(sha256_file(big), "sha256-64m:" + sha256_text(lines));
  fs::remove(big);
}

// sha256_file remembers a big settled file's digest (manifest.cpp): a change
// in place that keeps the size, looked up a second later or right after a
// hash, must still give the new content's digest.
TEST(Manifest, RememberedDigestFollowsEveryChange) {
  const fs::path d = scratch("digest");
  fs::create_directories(d);
  const fs::path f = d / "big.bin";
  std::string bytes(size_t{17} << 20, 'a');
  auto put = [&](size_t at, char c) {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(at));
    io.put(c);
  };
  std::ofstream(f, std::ios::binary) << bytes;
  auto digest_of = [&] { return sha256_bytes(std::as_bytes(std::span(bytes.data(), bytes.size()))); };
  EXPECT_EQ(sha256_file(f), digest_of());  // fresh: not remembered
  ::sleep(2);
  EXPECT_EQ(sha256_file(f), digest_of());  // settled: remembered
  EXPECT_EQ(sha256_file(f), digest_of());
  put(5, 'b');  // and looked up again once settled
  bytes[5] = 'b';
  ::sleep(2);
  EXPECT_EQ(sha256_file(f), digest_of());
  put(6, 'c');  // right after a hash: within the clock tick of the last change
  bytes[6] = 'c';
  EXPECT_EQ(sha256_file(f), digest_of());
}

// check_deployment on hand-built manifests: an interrupted phase, a phase
// judged on other options, an input no earlier phase wrote.
TEST(Manifest, CheckDeploymentReChecksTheVerdictChain) {
  const fs::path d = scratch("chain");
  fs::create_directories(d);
  std::ofstream(d / "a.json") << "{}";
  Manifest m;
  m.record(d, "a.json", 0);
  m.phases[0] = {"passed", {{"options", "o"}}};
  m.phases[1] = {"running", {{"options", "o"}, {"a.json", sha256_file(d / "a.json")}}};
  auto problems = check_deployment(d, m, {"a.json"});
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("phase 1 was interrupted"), std::string::npos) << problems[0];
  m.phases[1] = {"passed", {{"options", "other"}, {"a.json", sha256_file(d / "a.json")}}};
  problems = check_deployment(d, m, {"a.json", "b.json"});
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("phase 1 was judged on other options than phase 0"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("b.json is not an artifact"), std::string::npos) << problems[1];
  m.phases[1] = {"passed", {{"options", "o"}, {"a.json", sha256_file(d / "a.json")}, {"z.bin", "0"}}};
  problems = check_deployment(d, m, {});
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("phase 1 read z.bin, which no earlier phase wrote"), std::string::npos) << problems[0];
  m.phases[1].inputs.erase("z.bin");
  EXPECT_TRUE(check_deployment(d, m, {"a.json"}).empty());
}

}  // namespace
}  // namespace tessera::pipeline
