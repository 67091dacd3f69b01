// safetensors reader/writer: round trips, sharding, and one crafted bad file
// per validation rule, each with its specific error.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "tessera/core/error.h"
#include "tessera/model/mapped_pages.h"
#include "tessera/model/safetensors.h"
#include "tessera/model/safetensors_stream.h"

namespace tessera::model {
namespace {

using testing::expect_error;
using testing::TempDir;
using testing::write_file;

// A file from raw parts: 8-byte length (or `length_override`), header, data.
std::string craft(const std::string& header, size_t data_bytes, int64_t length_override = -1) {
  uint64_t n = length_override >= 0 ? static_cast<uint64_t>(length_override) : header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += header;
  for (size_t i = 0; i < data_bytes; ++i) out += static_cast<char>(i & 0x7f);
  return out;
}

// Two F32 tensors a[2] at [0,8) and b[3] at [8,20).
const char* kTwo = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("b":{"dtype":"F32","shape":[3],"data_offsets":[8,20]}})";

class Safetensors : public ::testing::Test {
 protected:
  std::filesystem::path file(const std::string& bytes) {
    auto p = dir_ / "t.safetensors";
    write_file(p, bytes);
    return p;
  }
  void expect_bad(const std::string& bytes, std::vector<std::string> parts) {
    auto p = file(bytes);
    parts.push_back(p.string());
    expect_error<SafetensorsError>([&] { load_safetensors(p); }, parts);
  }
  TempDir dir_;
};

TEST_F(Safetensors, WriteThenReadRoundTrip) {
  std::vector<float> av{1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  Tensor a = Tensor::from_f32({2, 3}, av);
  Tensor b = a.to(DType::bf16), h = a.to(DType::f16);
  auto p = dir_ / "rt.safetensors";
  write_safetensors(p, {{"w.a", a}, {"w.b", b}, {"w.h", h}}, {{"format", "pt"}});
  auto f = SafetensorsFile::open(p);
  EXPECT_EQ(f.header().metadata.at("format"), "pt");
  EXPECT_EQ(f.header().data_offset % 8, 0u);  // header padded as the reference does
  Weights w;
  f.add_all_to(w);
  ASSERT_EQ(w.size(), 3u);
  for (const char* n : {"w.a", "w.b", "w.h"}) {
    EXPECT_EQ(w.get(n).shape(), (Shape{2, 3})) << n;
    EXPECT_EQ(w.get(n).to_f32_vector(), av) << n;  // all values exact in bf16/f16
  }
  EXPECT_EQ(w.get("w.b").dtype(), DType::bf16);
  EXPECT_EQ(w.get("w.h").dtype(), DType::f16);
}

TEST_F(Safetensors, ViewsOutliveTheFileObject) {
  auto p = dir_ / "v.safetensors";
  write_safetensors(p, {{"x", Tensor::from_f32({4}, std::vector<float>{1, 2, 3, 4})}});
  Tensor t;
  {
    Weights w = load_safetensors(p);
    t = w.get("x");
  }
  std::filesystem::remove(p);  // the mapping keeps the data
  EXPECT_EQ(t.to_f32_vector(), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(Safetensors, UnalignedDataIsCopiedNotMisread) {
  // Header of odd length puts the F32 data at an odd address in the map.
  std::string header = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} )";
  std::string bytes = craft(header, 0);
  float v = 2.5f;
  bytes.append(reinterpret_cast<const char*>(&v), 4);
  ASSERT_NE((8 + header.size()) % 4, 0u);
  EXPECT_EQ(load_safetensors(file(bytes)).get("x").to_f32_vector(), std::vector<float>{2.5f});
}

TEST_F(Safetensors, EmptyHeaderAndZeroSizedTensors) {
  EXPECT_EQ(load_safetensors(file(craft("{}", 0))).size(), 0u);
  auto w = load_safetensors(file(craft(
      R"({"z":{"dtype":"BF16","shape":[0,4],"data_offsets":[0,0]},)"
      R"("a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}})", 2)));
  EXPECT_EQ(w.get("z").numel(), 0);
}

TEST_F(Safetensors, TooShortForLength) { expect_bad("abc", {"too short"}); }

TEST_F(Safetensors, TruncatedFile) {
  std::string ok = craft(kTwo, 20);
  expect_bad(ok.substr(0, ok.size() - 5), {"'b'", "beyond the data section"});
}

TEST_F(Safetensors, HeaderLengthLargerThanFile) {
  expect_bad(craft(kTwo, 20, 5000), {"header length 5000", "larger than the file"});
}

TEST_F(Safetensors, HeaderLengthOverCap) {
  expect_bad(craft(kTwo, 20, int64_t{1} << 40), {"exceeds", "cap"});
}

TEST_F(Safetensors, BadJson) { expect_bad(craft(R"({"a": {"dtype": )", 0), {"not valid JSON"}); }

TEST_F(Safetensors, HeaderNotAnObject) { expect_bad(craft("[1, 2]", 0), {"JSON object"}); }

TEST_F(Safetensors, OverlappingOffsets) {
  expect_bad(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("b":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})", 16),
             {"'b'", "overlaps", "'a'"});
}

TEST_F(Safetensors, GapInDataSection) {
  expect_bad(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("b":{"dtype":"F32","shape":[3],"data_offsets":[12,24]}})", 24),
             {"gap of 4 bytes", "'b'"});
}

TEST_F(Safetensors, TrailingBytes) { expect_bad(craft(kTwo, 28), {"8 trailing bytes", "'b'"}); }

TEST_F(Safetensors, UnknownDtypeString) {
  expect_bad(craft(R"({"a":{"dtype":"F17","shape":[2],"data_offsets":[0,8]}})", 8),
             {"'a'", "unknown dtype", "F17"});
}

TEST_F(Safetensors, UnsupportedDtype) {
  expect_bad(craft(R"({"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8),
             {"'ids'", "I64", "not supported"});
}

TEST_F(Safetensors, ShapeByteMismatch) {
  expect_bad(craft(R"({"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,8]}})", 8),
             {"'a'", "needs 12 bytes", "span 8"});
}

TEST_F(Safetensors, OffsetsOutOfRange) {
  expect_bad(craft(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
             {"'a'", "beyond the data section of 8 bytes"});
}

TEST_F(Safetensors, BeginAfterEnd) {
  expect_bad(craft(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
             {"'a'", "begin 8 > end 0"});
}

TEST_F(Safetensors, MissingEntryKeysAndBadTypes) {
  expect_bad(craft(R"({"a":{"dtype":"F32","shape":[2]}})", 8), {"'a'", "data_offsets"});
  expect_bad(craft(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
             {"'a'", "bad dimension"});
  expect_bad(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8),
             {"'a'", "[begin, end]"});
  expect_bad(craft(R"({"__metadata__":{"k":1}})", 0), {"__metadata__", "'k'"});
}

class Sharded : public Safetensors {
 protected:
  void SetUp() override {
    write_safetensors(dir_ / "model-00001-of-00002.safetensors",
                      {{"a", Tensor::from_f32({2}, std::vector<float>{1, 2})}});
    write_safetensors(dir_ / "model-00002-of-00002.safetensors",
                      {{"b", Tensor::from_f32({1}, std::vector<float>{3})},
                       {"c", Tensor::from_f32({1}, std::vector<float>{4})}});
  }
  void index(const nlohmann::json& weight_map) {
    write_file(dir_ / "model.safetensors.index.json",
               nlohmann::json{{"metadata", {{"total_size", 16}}}, {"weight_map", weight_map}}.dump());
  }
  const char* s1 = "model-00001-of-00002.safetensors";
  const char* s2 = "model-00002-of-00002.safetensors";
};

TEST_F(Sharded, LoadsEveryShard) {
  index({{"a", s1}, {"b", s2}, {"c", s2}});
  Weights w = load_safetensors_dir(dir_.path());
  EXPECT_EQ(w.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(w.get("c").to_f32_vector(), std::vector<float>{4});
}

TEST_F(Sharded, IndexNamesTensorAbsentFromShard) {
  index({{"a", s1}, {"b", s2}, {"c", s2}, {"d", s1}});
  expect_error<SafetensorsError>([&] { load_safetensors_dir(dir_.path()); }, {"'d'", s1});
}

TEST_F(Sharded, ShardTensorNotInIndex) {
  index({{"a", s1}, {"b", s2}});
  expect_error<SafetensorsError>([&] { load_safetensors_dir(dir_.path()); },
                                 {"'c'", s2, "not mapped"});
}

TEST_F(Sharded, MissingShardAndPathEscape) {
  index({{"a", s1}, {"b", "model-00009.safetensors"}});
  expect_error<FileError>([&] { load_safetensors_dir(dir_.path()); }, {"model-00009"});
  index({{"a", "../model.safetensors"}});
  expect_error<SafetensorsError>([&] { load_safetensors_dir(dir_.path()); },
                                 {"'a'", "invalid shard name"});
}

TEST_F(Safetensors, DirectoryWithoutWeights) {
  expect_error<FileError>([&] { load_safetensors_dir(dir_.path()); },
                          {dir_.path().string(), "model.safetensors"});
}

}  // namespace
}  // namespace tessera::model

namespace tessera::model {
namespace {

// Resident pages of this process, from /proc/self/statm (field 2).
int64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

TEST_F(Safetensors, StreamWriterWritesWhatTheWholeFileWriterWrites) {
  const Tensor a = Tensor::from_f32({2, 3}, std::vector<float>{1.5f, -2, 3.25f, 0, 7, -0.5f}).to(DType::bf16);
  const Tensor b = Tensor::from_f32({3}, std::vector<float>{4, 5, 6});
  const auto p = dir_ / "stream.safetensors";
  {
    SafetensorsStreamWriter w(p, 1000);
    w.add("b", b.dtype(), b.shape(), {b.bytes(), b.nbytes()});  // data in call order, not name order
    w.add("a", a.dtype(), a.shape(), {a.bytes(), a.nbytes()});
    EXPECT_FALSE(std::filesystem::exists(p)) << "visible before finish";
    w.finish({{"format", "x"}});
  }
  const auto f = SafetensorsFile::open(p);
  EXPECT_EQ(f.header().metadata.at("format"), "x");
  EXPECT_EQ(f.header().data_offset, 8u + 1000u);  // the reserve (a multiple of 8) kept whole
  Weights w;
  f.add_all_to(w);
  EXPECT_EQ(w.get("a").to_f32_vector(), a.to_f32_vector());
  EXPECT_EQ(w.get("b").to_f32_vector(), b.to_f32_vector());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "stream.safetensors.tmp"));
}

TEST_F(Safetensors, StreamWriterRefusesAHeaderLargerThanItsReserveAndLeavesNoFile) {
  const Tensor a = Tensor::from_f32({2}, std::vector<float>{1, 2});
  const auto p = dir_ / "small.safetensors";
  expect_error<SafetensorsError>(
      [&] {
        SafetensorsStreamWriter w(p, 16);
        w.add("a", a.dtype(), a.shape(), {a.bytes(), a.nbytes()});
        w.finish();
      },
      {p.string(), "outgrew the 16 bytes reserved"});
  EXPECT_FALSE(std::filesystem::exists(p));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "small.safetensors.tmp"));
  expect_error<SafetensorsError>(
      [&] {
        SafetensorsStreamWriter w(p, 4096);
        w.add("a", a.dtype(), {3}, {a.bytes(), a.nbytes()});
      },
      {"'a'", "[3]", "8 bytes of data"});
}

// A model larger than the machine's memory is read a part at a time: the
// pages of a mapped tensor leave the resident set and read back the same.
// Owned memory is never touched (madvise would zero it).
TEST_F(Safetensors, ReleasedPagesOfAMappedTensorLeaveTheResidentSet) {
  constexpr int64_t kN = 8 << 20;  // 32 MB of f32
  std::vector<float> v(kN);
  for (int64_t i = 0; i < kN; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % 1000);
  const auto p = dir_ / "big.safetensors";
  write_safetensors(p, {{"x", Tensor::from_f32({kN}, v)}});
  v = {};
  const Weights w = load_safetensors(p);
  const Tensor& t = w.get("x");
  double sum = 0;
  for (float x : t.as<float>()) sum += x;  // faults every page in
  const int64_t before = resident_bytes();
  release_mapped_pages(w);
  const int64_t after = resident_bytes();
  EXPECT_GT(before - after, int64_t{3} * kN) << "released " << before - after << " of " << 4 * kN << " bytes";
  double again = 0;
  for (float x : t.as<float>()) again += x;
  EXPECT_EQ(again, sum);
  const Tensor owned = Tensor::from_f32({kN}, t.to_f32_vector());
  release_mapped_pages(owned);
  EXPECT_EQ(owned.to_f32_vector(), t.to_f32_vector());
}

}  // namespace
}  // namespace tessera::model
