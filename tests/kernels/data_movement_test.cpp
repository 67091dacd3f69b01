// kv_append, embedding_gather and topk: exact results (copies and
// comparisons), so the reference is equality.
#include <algorithm>
#include <numeric>

#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "tessera/kernels/flash_attention.h"
#include "tessera/kernels/topk.h"

namespace tessera::kernels::test {
namespace {

uint16_t bits(bf16 v) { return v.bits; }

// Appends head 1 of a [rows, 3 heads * d] projection output at row 5 of a cache
// block, in both layouts; everything else in the cache stays untouched.
TEST(KvAppend, CopiesOneHeadIntoBothLayouts) {
  const int64_t rows = 3, d = 10, heads = 3, cap = 12, at = 5;
  auto src = random_bf16(rows * heads * d, 1);
  for (std::string layout : {"rows", "transposed"}) {
    std::vector<bf16> cache(cap * d, f32_to_bf16(-7.0f));
    npu::KernelParams p{{"rows", rows}, {"head_dim", d}, {"dst_row", at}, {"capacity", cap},
                        {"src_stride", heads * d}, {"src_col", d}, {"layout", layout}};
    run_kernel("kv_append", p, {bytes_of(src), bytes_of(cache)});
    for (int64_t r = 0; r < cap; ++r) {
      for (int64_t j = 0; j < d; ++j) {
        bf16 got = layout == "rows" ? cache[r * d + j] : cache[j * cap + r];
        bf16 want = (r >= at && r < at + rows) ? src[(r - at) * heads * d + d + j]
                                               : f32_to_bf16(-7.0f);
        ASSERT_EQ(bits(got), bits(want)) << layout << " row " << r << " col " << j;
      }
    }
  }
}

TEST(KvAppend, RejectsAppendPastCapacity) {
  npu::KernelParams p{{"rows", 4}, {"head_dim", 8}, {"dst_row", 13}, {"capacity", 16}};
  EXPECT_THROW(tile_kernel_l1_bytes("kv_append", p), KernelArgError);
}

// The vocab split into blocks of 7 rows (ragged last block); every token's row
// arrives from exactly one block call.
TEST(Embedding, GathersRowsAcrossVocabBlocks) {
  const int64_t vocab = 30, hidden = 5, block = 7;
  auto table = random_bf16(vocab * hidden, 2);
  std::vector<int32_t> ids = {0, 29, 7, 6, 13, 13, 21};
  const auto count = static_cast<int64_t>(ids.size());
  std::vector<bf16> out(count * hidden, f32_to_bf16(0.5f));
  for (int64_t row0 = 0; row0 < vocab; row0 += block) {
    const int64_t n = std::min(block, vocab - row0);
    std::vector<bf16> blk(table.begin() + row0 * hidden, table.begin() + (row0 + n) * hidden);
    run_kernel("embedding_gather",
               {{"count", count}, {"hidden", hidden}, {"row0", row0}, {"block_rows", n},
                {"vocab", vocab}},
               {bytes_of(ids), bytes_of(blk), bytes_of(out)});
  }
  for (int64_t t = 0; t < count; ++t)
    for (int64_t j = 0; j < hidden; ++j)
      ASSERT_EQ(bits(out[t * hidden + j]), bits(table[ids[t] * hidden + j])) << t << "," << j;
}

TEST(Embedding, RejectsIdOutsideVocab) {
  std::vector<int32_t> ids = {3, 30};
  auto table = random_bf16(30 * 4, 3);
  std::vector<bf16> out(2 * 4);
  EXPECT_THROW(run_kernel("embedding_gather",
                          {{"count", 2}, {"hidden", 4}, {"row0", 0}, {"block_rows", 30},
                           {"vocab", 30}},
                          {bytes_of(ids), bytes_of(table), bytes_of(out)}),
               KernelArgError);
}

// Logits with many ties (coarse values), split into ragged blocks over two
// partial states then merged; must equal a stable sort by (value desc, index).
TEST(Topk, BlockedAndMergedEqualsStableSort) {
  const int64_t vocab = 1001;
  std::vector<bf16> logits(vocab);
  std::mt19937 rng(4);
  for (auto& l : logits) l = f32_to_bf16(float(int(rng() % 40)) - 20.0f);
  for (int64_t k : {1, 5, 40}) {
    std::vector<TopkEntry> a(k), b(k);
    run_kernel("topk_init", {{"k", k}}, {bytes_of(a)});
    run_kernel("topk_init", {{"k", k}}, {bytes_of(b)});
    for (int64_t i0 = 0, blk = 0; i0 < vocab; i0 += 97, ++blk) {
      const int64_t n = std::min<int64_t>(97, vocab - i0);
      std::vector<bf16> part(logits.begin() + i0, logits.begin() + i0 + n);
      run_kernel("topk_block", {{"n", n}, {"k", k}, {"index0", i0}},
                 {bytes_of(part), blk % 2 ? bytes_of(b) : bytes_of(a)});
    }
    run_kernel("topk_merge", {{"k", k}}, {bytes_of(a), bytes_of(b)});
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
      return bf16_to_f32(logits[x]) > bf16_to_f32(logits[y]);
    });
    for (int64_t j = 0; j < k; ++j) {
      ASSERT_EQ(a[j].index, order[j]) << "k " << k << " rank " << j;
      ASSERT_EQ(a[j].value, bf16_to_f32(logits[order[j]]));
    }
  }
}

TEST(Topk, NanLogitIsAnError) {
  std::vector<bf16> logits = {f32_to_bf16(1.0f), f32_to_bf16(NAN)};
  std::vector<TopkEntry> st(1);
  run_kernel("topk_init", {{"k", 1}}, {bytes_of(st)});
  EXPECT_THROW(run_kernel("topk_block", {{"n", 2}, {"k", 1}, {"index0", 10}},
                          {bytes_of(logits), bytes_of(st)}),
               KernelNumericError);
}

}  // namespace
}  // namespace tessera::kernels::test
