// GGUF reader and dequantizers: the committed fixture made by gguf-py
// (tools/reference/make_gguf_fixtures.py) must dequantize bit-exactly, and
// every malformed file (crafted below) must be a GgufError naming the file
// and the key or tensor at fault.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "model_test_util.h"
#include "tessera/model/gguf.h"

namespace tessera::model {
namespace {

using testing::expect_error;

const std::filesystem::path kFixture = std::filesystem::path(TESSERA_TEST_DATA) / "gguf/quants.gguf";

std::vector<std::byte> as_bytes(const std::string& s) {
  std::vector<std::byte> b(s.size());
  if (!s.empty()) std::memcpy(b.data(), s.data(), s.size());
  return b;
}

GgufFile parse(const std::string& bytes, const std::string& name = "t.gguf") {
  auto owner = std::make_shared<std::vector<std::byte>>(as_bytes(bytes));
  return GgufFile::parse(owner, *owner, name);
}

// Crafts GGUF files field by field.
class Builder {
 public:
  Builder& raw(const void* p, size_t n) {
    out_.append(static_cast<const char*>(p), n);
    return *this;
  }
  template <class T>
  Builder& put(T v) { return raw(&v, sizeof v); }
  Builder& str(const std::string& s) { return put<uint64_t>(s.size()).raw(s.data(), s.size()); }
  Builder& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    return raw("GGUF", 4).put<uint32_t>(version).put<uint64_t>(tensors).put<uint64_t>(kvs);
  }
  Builder& kv_u32(const std::string& key, uint32_t v) {
    return str(key).put<uint32_t>(4).put<uint32_t>(v);
  }
  Builder& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                  uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (auto d : dims) put<uint64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  Builder& pad_data(size_t data_bytes, size_t align = 32) {
    while (out_.size() % align) out_ += '\0';
    out_.append(data_bytes, '\x01');
    return *this;
  }
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

TEST(Gguf, ReadsEveryMetadataType) {
  const GgufFile f = GgufFile::open(kFixture);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.get_int("test.u8"), 200);
  EXPECT_EQ(f.get_int("test.i8"), -100);
  EXPECT_EQ(f.get_int("test.u16"), 60000);
  EXPECT_EQ(f.get_int("test.i16"), -30000);
  EXPECT_EQ(f.get_int("test.u32"), 4000000000);
  EXPECT_EQ(f.get_int("test.i32"), -2000000000);
  EXPECT_EQ(f.get("test.u64").u, (1ull << 63) + 5);
  expect_error<GgufError>([&] { f.get_int("test.u64"); }, {"test.u64", "int64"});
  EXPECT_EQ(f.get_int("test.i64"), -(int64_t{1} << 62));
  EXPECT_EQ(f.get_float("test.f32"), 1e-5);  // shortest decimal of the f32
  EXPECT_EQ(f.get_float("test.f64"), 0.1);
  EXPECT_EQ(f.get_bool_opt("test.bool"), true);
  EXPECT_EQ(f.get_string("test.string"), "h\xc3\xa9llo w\xc3\xb6rld");
  const auto& ints = f.get_array("test.array.i32", GgufValueType::i32);
  ASSERT_EQ(ints.size(), 3u);
  EXPECT_EQ(ints[1].i, -2);
  const auto& strs = f.get_array("test.array.string", GgufValueType::string);
  ASSERT_EQ(strs.size(), 3u);
  EXPECT_EQ(strs[1].s, "");
  EXPECT_EQ(strs[2].s, "\xc4\xa0the");
  const auto& nested = f.get_array("test.array.nested", GgufValueType::array);
  ASSERT_EQ(nested.size(), 2u);
  EXPECT_EQ(nested[0].items.size(), 2u);
  EXPECT_EQ(nested[1].items.at(0).i + static_cast<int64_t>(nested[1].items.at(0).u), 3);
  expect_error<GgufError>([&] { f.get_string("test.u8"); }, {"quants.gguf", "test.u8", "string"});
  expect_error<GgufError>([&] { f.get_int("no.such.key"); }, {"no.such.key", "missing"});
  expect_error<GgufError>([&] { f.get_array("test.array.i32", GgufValueType::string); },
                          {"test.array.i32", "array of string", "array of i32"});
}

// One test per type so a failure names the type; every element is compared
// bit for bit (NaN-free by construction; +-0 and +-inf included).
class GgufDequant : public ::testing::TestWithParam<const char*> {};

TEST_P(GgufDequant, BitExactWithGgufPy) {
  static const GgufFile f = GgufFile::open(kFixture);
  const std::string type = GetParam();
  const GgufTensorInfo* q = f.find_tensor("q." + type);
  const GgufTensorInfo* e = f.find_tensor("expected." + type);
  ASSERT_TRUE(q && e);
  EXPECT_STREQ(ggml_type_info(q->type)->name, type.c_str());
  const Tensor got = f.tensor_f32(*q);
  const Tensor want = f.tensor_f32(*e);
  ASSERT_EQ(got.shape(), (Shape{2, 512}));
  ASSERT_EQ(want.shape(), got.shape());
  auto g = got.as<uint32_t>(), w = want.as<uint32_t>();
  int64_t mismatches = 0, first = -1;
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i] != w[i] && mismatches++ == 0) first = static_cast<int64_t>(i);
  EXPECT_EQ(mismatches, 0) << type << ": first mismatch at element " << first << ": got "
                           << got.as<float>()[static_cast<size_t>(first)] << ", gguf-py "
                           << want.as<float>()[static_cast<size_t>(first)];
}

INSTANTIATE_TEST_SUITE_P(Types, GgufDequant,
                         ::testing::Values("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K",
                                           "Q6_K"),
                         [](const auto& p) { return std::string(p.param); });

TEST(Gguf, VersionTwoReadsLikeThree) {
  std::string bytes = testing::read_file(kFixture);
  bytes[4] = 2;
  const GgufFile f = parse(bytes);
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.tensors().size(), 16u);
}

TEST(Gguf, EveryTruncationIsAnError) {
  const std::string bytes = testing::read_file(kFixture);
  const uint64_t data = GgufFile::open(kFixture).data_offset();
  // Every cut inside the header and a few inside the data section.
  for (size_t n = 0; n < bytes.size(); n += n < data ? 1 : 997)
    EXPECT_THROW(parse(bytes.substr(0, n)), GgufError) << "cut at " << n;
}

TEST(Gguf, RejectsBadMagicAndVersions) {
  expect_error<GgufError>([] { parse("GGML" + std::string(20, '\0')); }, {"t.gguf", "bad magic"});
  for (uint32_t v : {1u, 4u, 0x03000000u})
    expect_error<GgufError>([&] { parse(Builder().header(0, 0, v).bytes()); },
                            {"t.gguf", "unsupported GGUF version"});
}

TEST(Gguf, CountsThatCannotFitAreErrorsNotAllocations) {
  const uint64_t huge = std::numeric_limits<uint64_t>::max();
  expect_error<GgufError>([&] { parse(Builder().header(0, huge).bytes()); },
                          {"metadata count", "cannot fit"});
  expect_error<GgufError>([&] { parse(Builder().header(huge / 2, 0).bytes()); },
                          {"tensor count", "cannot fit"});
  // An array claiming 2^62 u32 elements.
  Builder arr;
  arr.header(0, 1).str("big.array").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(1ull << 62);
  expect_error<GgufError>([&] { parse(arr.bytes()); }, {"big.array", "array element count"});
  Builder s;
  s.header(0, 1).str("k").put<uint32_t>(8).put<uint64_t>(huge);
  expect_error<GgufError>([&] { parse(s.bytes()); }, {"truncated", "'k'"});
  Builder key;
  key.header(0, 1).put<uint64_t>(huge).put<uint64_t>(0);
  expect_error<GgufError>([&] { parse(key.bytes()); }, {"truncated", "metadata key 0"});
}

TEST(Gguf, RejectsMalformedMetadata) {
  Builder unknown;
  unknown.header(0, 1).str("odd").put<uint32_t>(13).put<uint32_t>(0);
  expect_error<GgufError>([&] { parse(unknown.bytes()); }, {"'odd'", "unknown value type 13"});
  Builder dup;
  dup.header(0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2);
  expect_error<GgufError>([&] { parse(dup.bytes()); }, {"duplicate metadata key 'a.b'"});
  Builder align;
  align.header(0, 1).kv_u32("general.alignment", 24);
  expect_error<GgufError>([&] { parse(align.bytes()); }, {"general.alignment", "power of two"});
  Builder b;
  b.header(0, 1).str("flag").put<uint32_t>(7).put<uint8_t>(2);
  expect_error<GgufError>([&] { parse(b.bytes()); }, {"'flag'", "bool"});
  Builder deep;
  deep.header(0, 1).str("deep");
  deep.put<uint32_t>(9);
  for (int i = 0; i < kGgufMaxArrayDepth + 1; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
  expect_error<GgufError>([&] { parse(deep.bytes()); }, {"'deep'", "nested deeper"});
}

TEST(Gguf, RejectsMalformedTensorInfos) {
  auto one = [](const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                uint64_t offset, size_t data) {
    return Builder().header(1, 0).tensor(name, std::move(dims), type, offset).pad_data(data).bytes();
  };
  expect_error<GgufError>([&] { parse(one("w", {32}, 99, 0, 128)); },
                          {"t.gguf", "tensor 'w'", "unknown ggml type 99"});
  expect_error<GgufError>([&] { parse(one("w", {33}, 2, 0, 128)); },
                          {"tensor 'w'", "row length 33", "Q4_0 block size 32"});
  expect_error<GgufError>([&] { parse(one("w", {4, 0}, 0, 0, 128)); }, {"tensor 'w'", "zero"});
  expect_error<GgufError>([&] { parse(one("w", {1ull << 40, 1ull << 40}, 0, 0, 128)); },
                          {"tensor 'w'", "overflow"});
  expect_error<GgufError>([&] { parse(one("w", {2, 2, 2, 2, 2}, 0, 0, 128)); },
                          {"tensor 'w'", "5 dimensions"});
  expect_error<GgufError>([&] { parse(one("w", {8}, 0, 16, 128)); },
                          {"tensor 'w'", "offset 16", "alignment 32"});
  expect_error<GgufError>([&] { parse(one("w", {64}, 0, 0, 128)); },
                          {"tensor 'w'", "bytes [0, 256)", "128-byte data section"});
  const std::string overlap = Builder()
                                  .header(2, 0)
                                  .tensor("a", {16}, 0, 0)
                                  .tensor("b", {8}, 0, 32)
                                  .pad_data(128)
                                  .bytes();
  expect_error<GgufError>([&] { parse(overlap); }, {"tensor 'a'", "overlaps tensor 'b'"});
  const std::string dup =
      Builder().header(2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).pad_data(64).bytes();
  expect_error<GgufError>([&] { parse(dup); }, {"duplicate tensor 'a'"});
}

TEST(Gguf, ReadsACraftedFileWithCustomAlignment) {
  Builder b;
  b.header(1, 1).kv_u32("general.alignment", 16).tensor("x", {4}, 0, 0).pad_data(0, 16);
  std::string bytes = b.bytes();
  for (float v : {1.5f, -2.0f, 0.25f, 8.0f}) bytes.append(reinterpret_cast<const char*>(&v), 4);
  const GgufFile f = parse(bytes);
  EXPECT_EQ(f.alignment(), 16u);
  const Tensor t = f.tensor_f32(f.tensors().at(0));
  EXPECT_EQ(t.to_f32_vector(), (std::vector<float>{1.5f, -2.0f, 0.25f, 8.0f}));
}

TEST(Gguf, UnsupportedTypeIsNamedOnDequantization) {
  std::vector<std::byte> src(22);
  std::vector<float> dst(32);
  expect_error<UnsupportedError>([&] { ggml_dequantize(6, src, dst, "tensor 'w'"); },
                                 {"tensor 'w'", "Q5_0", "supported: F32"});
}

}  // namespace
}  // namespace tessera::model
