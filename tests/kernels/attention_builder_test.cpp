// attention_prefill / attention_decode builders: ragged shapes (S, P, T not
// multiples of the blocks, odd head counts, GQA) on the simulator against
// oracle::causal_attention with a bound derived from the bf16 rules of the
// flash_attn kernel; the planted GQA head-mapping bug must fail that bound;
// every preset's attention shape at seq 1, 17 and 2048 builds, validates and
// has a timing estimate on both device presets.
#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <tuple>

#include <gtest/gtest.h>

#include "attention_builder_test_util.h"
#include "kernel_test_util.h"
#include "tessera/kernels/builders/attention.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/kernels/tile_search.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/npu/timing.h"
#include "tessera/oracle/ops.h"

namespace tessera::kernels {
namespace {

using test::kU32;
using test::kUBf16;

struct Case {
  int64_t S, P, heads, kv, D;
};

using test::bf16_values;

int64_t planted_kv_map(int64_t h, int64_t, int64_t kv) { return h % kv; }

// Per element: |out - ref| <= sum_j w_j E_j |v_j - ref| / (1 - max E) + fp32
// sum terms + u_bf16 |ref|, where E_j is the relative error of softmax weight
// j: u_bf16 (|s_j| + (max - s_j) + 1 + (1 + merges) range) from the bf16
// score, exp operand and exp result, plus (u_bf16 + 2e-6) per online rescale
// (one per K/V block) - the same derivation as attention_test.cpp's kernel
// bound, over the whole causal row. `ref` is the oracle's FP32 output.
std::vector<double> bound_for(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, const std::vector<float>& ref,
                              int64_t steps, int64_t merges) {
  const int64_t d = c.D, G = c.heads / c.kv, T = c.P + c.S;
  const double scale = 1.0 / std::sqrt(double(d));
  std::vector<double> bound(ref.size());
  for (int64_t i = 0; i < c.S; ++i)
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t n = c.P + i + 1, kvh = h / G;
      const float* qr = q.data() + (i * c.heads + h) * d;
      std::vector<double> s(n), w(n), e(n);
      double mx = -INFINITY, mn = INFINITY, sum = 0, emax = 0, serr = 0;
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0, mag = 0;
        for (int64_t t = 0; t < d; ++t) {
          const double p = double(qr[t]) * k[(j * c.kv + kvh) * d + t];
          acc += p;
          mag += std::fabs(p);
        }
        s[j] = acc * scale;
        mx = std::max(mx, s[j]);
        mn = std::min(mn, s[j]);
        serr = std::max(serr, d * kU32 * scale * mag);
      }
      for (int64_t j = 0; j < n; ++j) {
        sum += w[j] = std::exp(s[j] - mx);
        e[j] = kUBf16 * (std::fabs(s[j]) + (mx - s[j]) + 1 + (mx - mn) * double(1 + merges)) +
               double(steps) * (kUBf16 + 2e-6) + 2e-6 + 2 * serr;
        emax = std::max(emax, e[j]);
      }
      for (int64_t t = 0; t < d; ++t) {
        const size_t at = static_cast<size_t>((i * c.heads + h) * d + t);
        double spread = 0, mag = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double vj = v[(j * c.kv + kvh) * d + t];
          spread += w[j] / sum * e[j] * std::fabs(vj - ref[at]);
          mag += w[j] / sum * std::fabs(vj);
        }
        const double werr = spread / (1 - emax);
        bound[at] = werr + (n + 4) * kU32 * mag * (1 + emax) + kUBf16 * (std::fabs(ref[at]) + werr) +
                    T * kU32 * mag;
      }
    }
  return bound;
}

OpShape prefill_shape(const Case& c) {
  return {"attention_prefill",
          {{"S", c.S}, {"P", c.P}, {"heads", c.heads}, {"kv_heads", c.kv}, {"head_dim", c.D}},
          {}};
}
OpShape decode_shape(const Case& c) {
  return {"attention_decode",
          {{"T", c.P + 1}, {"heads", c.heads}, {"kv_heads", c.kv}, {"head_dim", c.D}},
          {}};
}

struct Outcome {
  std::vector<float> got, ref;
  std::vector<double> bound;
};

// Runs the built op on bf16-representable data and returns it beside the
// oracle (with the planted head mapping when asked) and the derived bound.
Outcome run_case(const Case& c, const BuiltOp& built, const npu::DeviceSpec& spec, int64_t steps,
                 int64_t merges, bool planted = false) {
  const int64_t T = c.P + c.S;
  auto q = bf16_values(static_cast<size_t>(c.S * c.heads * c.D), 11, -2, 2);
  auto k = bf16_values(static_cast<size_t>(T * c.kv * c.D), 12, -2, 2);
  auto v = bf16_values(static_cast<size_t>(T * c.kv * c.D), 13, -1, 1);
  OpRun run = run_op(built, {q, k, v}, spec);
  Outcome o{run.outputs.at(0), std::vector<float>(q.size()), {}};
  oracle::AttentionShape as{c.S, c.P, c.heads, c.kv, c.D};
  oracle::causal_attention(as, q.data(), k.data(), v.data(), o.ref.data(),
                           planted ? planted_kv_map : oracle::kv_head_for);
  o.bound = bound_for(c, q, k, v, o.ref, steps, merges);
  return o;
}

class AttentionBuilderSim : public ::testing::TestWithParam<const char*> {};

TEST_P(AttentionBuilderSim, PrefillRaggedMatchesOracle) {
  const auto spec = npu::DeviceSpec::preset(GetParam());
  // (S, P) not multiples of (bq, bk); odd GQA groups; head_dim 64 and 128.
  const std::vector<std::pair<Case, TileOptions>> cases = {
      {{17, 0, 14, 2, 64}, {}},
      {{5, 11, 9, 3, 64}, {{"bq", 2}, {"bk", 8}}},
      {{23, 9, 4, 2, 128}, {{"bq", 3}, {"bk", 16}}},
      {{1, 30, 6, 6, 64}, {{"bk", 8}}},
      {{40, 0, 3, 1, 64}, {{"bq", 7}, {"bk", 24}}},
  };
  for (const auto& [c, tiles] : cases) {
    SCOPED_TRACE(fmt::format("S={} P={} heads={} kv={} d={} on {}", c.S, c.P, c.heads, c.kv, c.D,
                             spec.name));
    BuiltOp built = op_builder("attention_prefill").build(prefill_shape(c), spec, tiles);
    const int64_t steps = (c.P + c.S + built.tiles.at("bk") - 1) / built.tiles.at("bk");
    Outcome o = run_case(c, built, spec, steps, 0);
    EXPECT_TRUE(test::within(test::to_f64(o.got), test::to_f64(o.ref), o.bound));
  }
}

// The cascade design (CascadePlan) on the same ragged shapes: an odd head
// count (idle segments), head_dim 128 (smaller blocks), stages left without
// K/V blocks; each stage's state is merged once more than the plain design.
TEST_P(AttentionBuilderSim, CascadePrefillRaggedMatchesOracle) {
  const auto spec = npu::DeviceSpec::preset(GetParam());
  const std::vector<std::pair<Case, TileOptions>> cases = {
      {{17, 0, 14, 2, 64}, {{"cascade", 4}}},
      {{5, 11, 9, 3, 64}, {{"cascade", 2}, {"qtiles", 2}, {"bq", 2}, {"bk", 8}}},
      {{23, 9, 4, 2, 128}, {{"cascade", 4}}},
      {{40, 0, 3, 1, 64}, {{"cascade", 3}, {"bq", 7}, {"bk", 5}}},
  };
  for (const auto& [c, tiles] : cases) {
    SCOPED_TRACE(fmt::format("S={} P={} heads={} kv={} d={} on {}", c.S, c.P, c.heads, c.kv, c.D,
                             spec.name));
    BuiltOp built = op_builder("attention_prefill").build(prefill_shape(c), spec, tiles);
    const int64_t steps = (c.P + c.S + built.tiles.at("bk") - 1) / built.tiles.at("bk");
    Outcome o = run_case(c, built, spec, steps, built.tiles.at("cascade"));
    EXPECT_TRUE(test::within(test::to_f64(o.got), test::to_f64(o.ref), o.bound));
  }
}

// kv_split (K and V on their own streams, q objects captured from the K
// stream, attn_scores + attn_pv per block) on ragged causal shapes: GQA and
// MHA, stages without K/V blocks, head_dim 128, a past P, idle segments, and
// enough iterations that the sequence waits to reuse the shim BDs. The
// numerics are flash_attn's bit for bit, so the cascade's bound holds as is.
TEST_P(AttentionBuilderSim, CascadeKvSplitRaggedMatchesOracle) {
  const auto spec = npu::DeviceSpec::preset(GetParam());
  const std::vector<std::pair<Case, TileOptions>> cases = {
      {{17, 0, 14, 2, 64}, {{"cascade", 4}, {"kv_split", 1}}},
      {{5, 11, 9, 3, 64}, {{"cascade", 2}, {"qtiles", 2}, {"bq", 4}, {"kv_split", 1}}},
      {{23, 9, 4, 2, 128}, {{"cascade", 4}, {"bk", 8}, {"kv_split", 1}}},
      {{40, 0, 3, 1, 64}, {{"cascade", 3}, {"bq", 5}, {"bk", 5}, {"kv_split", 1}}},
      {{70, 3, 8, 2, 64}, {{"cascade", 2}, {"qtiles", 2}, {"bq", 8}, {"kv_split", 1}}},
  };
  for (const auto& [c, tiles] : cases) {
    SCOPED_TRACE(fmt::format("S={} P={} heads={} kv={} d={} on {}", c.S, c.P, c.heads, c.kv, c.D,
                             spec.name));
    BuiltOp built = op_builder("attention_prefill").build(prefill_shape(c), spec, tiles);
    ASSERT_EQ(built.tiles.at("kv_split"), 1);
    const int64_t steps = (c.P + c.S + built.tiles.at("bk") - 1) / built.tiles.at("bk");
    Outcome o = run_case(c, built, spec, steps, built.tiles.at("cascade"));
    EXPECT_TRUE(test::within(test::to_f64(o.got), test::to_f64(o.ref), o.bound));
  }
  // The last case runs in more than one run of shim tasks (waits between).
  const BuiltOp last = op_builder("attention_prefill").build(prefill_shape(cases.back().first), spec,
                                                             cases.back().second);
  EXPECT_TRUE(std::any_of(last.design.launches[0].sequence.begin(),
                          last.design.launches[0].sequence.end(),
                          [](const npu::DmaTask& t) { return t.after_wait; }));
}

// causal_skip 0 (the published kernel before its causal_skip option) computes
// the fully masked blocks the default skips: the kernel masks every score of
// them, so the output is the skipping design's bit for bit, and within the
// oracle bound; run_iters 1 (a wait after every iteration) changes only the
// sequence.
TEST_P(AttentionBuilderSim, CascadeWithoutCausalSkipIsBitIdentical) {
  const auto spec = npu::DeviceSpec::preset(GetParam());
  const std::vector<std::pair<Case, TileOptions>> cases = {
      {{17, 0, 14, 2, 64}, {{"cascade", 4}, {"kv_split", 1}}},
      {{70, 3, 8, 2, 64}, {{"cascade", 2}, {"qtiles", 2}, {"bq", 8}, {"kv_split", 1}}},
      {{40, 0, 3, 1, 64}, {{"cascade", 3}, {"bq", 7}, {"bk", 5}}},
  };
  for (const auto& [c, tiles] : cases) {
    SCOPED_TRACE(fmt::format("S={} P={} heads={} kv={} d={} on {}", c.S, c.P, c.heads, c.kv, c.D,
                             spec.name));
    TileOptions noskip = tiles;
    noskip["causal_skip"] = 0;
    if (tiles.count("kv_split")) noskip["run_iters"] = 1;
    const BuiltOp skip_op = op_builder("attention_prefill").build(prefill_shape(c), spec, tiles);
    const BuiltOp full_op = op_builder("attention_prefill").build(prefill_shape(c), spec, noskip);
    EXPECT_EQ(full_op.tiles.at("causal_skip"), 0);
    // Never faster; slower where the busiest core gains blocks.
    EXPECT_GE(npu::estimate_time(full_op.design, spec).total_seconds,
              npu::estimate_time(skip_op.design, spec).total_seconds);
    const int64_t steps = (c.P + c.S + full_op.tiles.at("bk") - 1) / full_op.tiles.at("bk");
    Outcome full = run_case(c, full_op, spec, steps, full_op.tiles.at("cascade"));
    Outcome skip = run_case(c, skip_op, spec, steps, skip_op.tiles.at("cascade"));
    EXPECT_TRUE(test::within(test::to_f64(full.got), test::to_f64(full.ref), full.bound));
    ASSERT_EQ(full.got.size(), skip.got.size());
    for (size_t i = 0; i < full.got.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(full.got[i]), std::bit_cast<uint32_t>(skip.got[i])) << i;
  }
}

// The tile search's (bq, bk) for a ragged prefill runs as exactly as the default.
TEST_P(AttentionBuilderSim, TileSearchChoiceMatchesOracle) {
  const auto spec = npu::DeviceSpec::preset(GetParam());
  const Case c{37, 5, 8, 2, 64};
  const TileChoice choice = search_tiles(prefill_shape(c), spec);
  EXPECT_GT(choice.candidates, 1);
  BuiltOp built = op_builder("attention_prefill").build(prefill_shape(c), spec, choice.best.tiles);
  const int64_t steps = (c.P + c.S + built.tiles.at("bk") - 1) / built.tiles.at("bk");
  Outcome o = run_case(c, built, spec, steps, 0);
  EXPECT_TRUE(test::within(test::to_f64(o.got), test::to_f64(o.ref), o.bound));
}

TEST_P(AttentionBuilderSim, DecodeRaggedMatchesOracle) {
  const auto spec = npu::DeviceSpec::preset(GetParam());
  // Case.P = T - 1: T = 1 (one key), T not a multiple of bk, fewer blocks than tiles.
  const std::vector<std::pair<Case, TileOptions>> cases = {
      {{1, 0, 9, 3, 64}, {}},
      {{1, 36, 14, 2, 64}, {{"bk", 8}}},
      {{1, 299, 4, 1, 128}, {{"bk", 16}}},
      {{1, 1000, 32, 8, 64}, {}},
  };
  for (const auto& [c, tiles] : cases) {
    SCOPED_TRACE(fmt::format("T={} heads={} kv={} d={} on {}", c.P + 1, c.heads, c.kv, c.D,
                             spec.name));
    BuiltOp built = op_builder("attention_decode").build(decode_shape(c), spec, tiles);
    const int64_t steps = (c.P + 1 + built.tiles.at("bk") - 1) / built.tiles.at("bk");
    Outcome o = run_case(c, built, spec, steps, 1);
    EXPECT_TRUE(test::within(test::to_f64(o.got), test::to_f64(o.ref), o.bound));
  }
}

// Resident K/V ("cache_rows"): the same blocks reach the same tiles, only the
// shim cuts them out of the head-major cache, so the result is bit-identical
// to the blocked design's; the cache buffer's size and where row t of head h
// lies do not depend on T (what lets it stay in DDR from one decode position
// to the next). 16 KV heads at bk = 8: two rounds per column whose shim tasks
// exceed the BDs of one launch, so the rounds take a launch each.
TEST_P(AttentionBuilderSim, DecodeResidentCacheIsTheBlockedResult) {
  const auto spec = npu::DeviceSpec::preset(GetParam());
  for (const auto& [c, tiles] : std::vector<std::pair<Case, TileOptions>>{
           {{1, 36, 14, 2, 64}, {{"bk", 8}}}, {{1, 299, 4, 1, 128}, {}}, {{1, 70, 9, 3, 64}, {}},
           {{1, 159, 16, 16, 64}, {{"bk", 8}}}}) {
    SCOPED_TRACE(fmt::format("T={} heads={} kv={} on {}", c.P + 1, c.heads, c.kv, spec.name));
    TileOptions resident = tiles;
    resident["cache_rows"] = 512;
    BuiltOp blocked = op_builder("attention_decode").build(decode_shape(c), spec, tiles);
    BuiltOp res = op_builder("attention_decode").build(decode_shape(c), spec, resident);
    EXPECT_EQ(res.tiles.at("cache_rows"), 512);
    const Outcome a = run_case(c, blocked, spec, 1, 1), b = run_case(c, res, spec, 1, 1);
    EXPECT_EQ(a.got, b.got);
    // Row t of head h at element (h * 512 + t) * D of a 512-row buffer, at T and T + 1.
    Case next = c;
    next.P += 1;
    BuiltOp later = op_builder("attention_decode").build(decode_shape(next), spec, resident);
    const int64_t kvd = c.kv * c.D;
    auto k = bf16_values(static_cast<size_t>((c.P + 2) * kvd), 5, -1, 1);
    npu::HostMemory h1, h2;
    res.pack(1, std::span<const float>(k).first(static_cast<size_t>((c.P + 1) * kvd)), h1);
    later.pack(1, k, h2);
    ASSERT_EQ(h1.at("k_cache").size(), static_cast<size_t>(512 * kvd * 2));
    ASSERT_EQ(h2.at("k_cache").size(), h1.at("k_cache").size());
    for (int64_t h = 0; h < c.kv; ++h) {
      const int64_t at = h * 512 * c.D * 2;
      EXPECT_TRUE(std::equal(h1.at("k_cache").begin() + at,
                             h1.at("k_cache").begin() + at + (c.P + 1) * c.D * 2,
                             h2.at("k_cache").begin() + at)) << "head " << h;
      const bf16* row = reinterpret_cast<const bf16*>(h2.at("k_cache").data()) + (h * 512 + c.P + 1) * c.D;
      EXPECT_EQ(bf16_to_f32(row[1]), k[static_cast<size_t>((c.P + 1) * kvd + h * c.D + 1)]) << "head " << h;
    }
  }
  // More rounds than one launch's shim BDs read: split into launches.
  const Case many{1, 159, 16, 16, 64};
  BuiltOp split = op_builder("attention_decode").build(decode_shape(many), spec, {{"bk", 8}, {"cache_rows", 512}});
  BuiltOp one = op_builder("attention_decode").build(decode_shape(many), spec, {{"bk", 8}});
  if (spec.name == "xdna2") {
    EXPECT_GT(split.design.launches.size(), one.design.launches.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, AttentionBuilderSim, ::testing::Values("xdna2", "xdna1"));

// A resident cache too short for the rows the tiles stream (here also cut
// into more chunks than a merge column's BDs take), or too short for the
// context at all, is refused by name.
TEST(AttentionBuilder, ResidentCacheLimitsAreLimitErrors) {
  const auto spec = npu::DeviceSpec::preset("xdna2");
  EXPECT_THROW(op_builder("attention_decode").build(decode_shape({1, 99, 4, 1, 64}), spec,
                                                    {{"cache_rows", 64}}),
               LimitError);
  EXPECT_THROW(op_builder("attention_decode").build(decode_shape({1, 4000, 4, 4, 64}), spec,
                                                    {{"bk", 8}, {"cache_rows", 4096}}),
               LimitError);
}

// The GQA mapping the builders implement (query head h reads KV head h / group)
// is told apart from the classic bug h % kv_heads: against an oracle with the
// planted mapping the same outputs must fall outside the bound.
TEST(AttentionBuilder, PlantedGqaMappingFails) {
  const auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  const Case c{9, 4, 8, 2, 64};
  BuiltOp pre = op_builder("attention_prefill").build(prefill_shape(c), spec);
  Outcome good = run_case(c, pre, spec, 4, 0);
  EXPECT_TRUE(test::within(test::to_f64(good.got), test::to_f64(good.ref), good.bound));
  Outcome bad = run_case(c, pre, spec, 4, 0, true);
  EXPECT_FALSE(test::within(test::to_f64(bad.got), test::to_f64(bad.ref), bad.bound));
  const Case d{1, 20, 8, 2, 64};
  BuiltOp dec = op_builder("attention_decode").build(decode_shape(d), spec);
  Outcome bad_d = run_case(d, dec, spec, 4, 1, true);
  EXPECT_FALSE(test::within(test::to_f64(bad_d.got), test::to_f64(bad_d.ref), bad_d.bound));
}

TEST(AttentionBuilder, ImpossibleShapesAreLimitErrors) {
  const auto spec = npu::DeviceSpec::preset("xdna2-sourced");
  EXPECT_THROW(op_builder("attention_prefill").build(prefill_shape({4, 0, 9, 2, 64}), spec),
               LimitError);
  // A head_dim whose single K/V row and state do not fit L1.
  EXPECT_THROW(op_builder("attention_decode").build(decode_shape({1, 10, 2, 1, 8192}), spec),
               LimitError);
  EXPECT_THROW(op_builder("attention_prefill").build(prefill_shape({4, 0, 2, 1, 64}), spec,
                                                     {{"rows", 99}}),
               LimitError);
  // Cascade: more stages than rows, than a segment's q tiles (each stage
  // needs its own shim), blocks that overflow stage 0's L1.
  for (const TileOptions& t : {TileOptions{{"cascade", 5}}, TileOptions{{"cascade", 4}, {"qtiles", 2}},
                               TileOptions{{"cascade", 4}, {"bq", 256}, {"bk", 256}},
                               // kv_split: q blocks ride the K stream, so bq == bk; 0 or 1.
                               TileOptions{{"cascade", 2}, {"bq", 4}, {"bk", 8}, {"kv_split", 1}},
                               TileOptions{{"cascade", 2}, {"kv_split", 2}}})
    EXPECT_THROW(op_builder("attention_prefill").build(prefill_shape({64, 0, 2, 1, 64}), spec, t),
                 LimitError);
}

// Blocks a core computes: flash_attn or attn_scores calls in its program
// (loops multiplied out).
int64_t attn_calls(const std::vector<npu::CoreOp>& ops) {
  int64_t n = 0;
  for (const auto& op : ops) {
    if (op.kind == npu::CoreOp::Kind::loop) n += op.count * attn_calls(op.body);
    if (op.kind == npu::CoreOp::Kind::call && (op.kernel == "flash_attn" || op.kernel == "attn_scores"))
      ++n;
  }
  return n;
}

// Llama-3.2-1B's prefill in mlir-air's configuration (LQP 256 = 4 q tiles of
// 64, LKP 64, a 4-deep cascade, 2 heads per iteration: 32 tiles): stage s
// owns keys [512 s, 512 s + 512), so stage 0 computes 8 blocks in every
// iteration but the first of each head pair (4), 60 per pair, 960 in all,
// while stage 3 computes only the last two super-blocks' 12 per pair. That
// imbalance -- the causal skip saves stage 0 almost nothing -- is what the
// published kernel pays and the round-dealt design does not.
TEST(AttentionBuilder, CascadeInThePublishedConfiguration) {
  const auto spec = npu::DeviceSpec::preset("xdna2");
  const OpShape s = prefill_shape({2048, 0, 32, 8, 64});
  const CascadePlan p = plan_attention_cascade(s, spec, {{"cascade", 4}});
  EXPECT_EQ(std::tuple(p.NQ, p.NS, p.H, p.bq, p.bk, p.cps, p.LX, p.HP),
            std::tuple(4, 4, 2, int64_t{64}, int64_t{64}, int64_t{8}, int64_t{8}, int64_t{16}));
  const BuiltOp b = op_builder("attention_prefill").build(s, spec, {{"cascade", 4}});
  std::map<npu::TileCoord, int64_t> calls;
  for (const auto& l : b.design.launches)
    for (const auto& c : l.cores) calls[c.tile] += attn_calls(c.program);
  EXPECT_EQ(calls.size(), 32u);
  EXPECT_EQ(calls[core_tile(spec, 3, 0)], 960);
  EXPECT_EQ(calls[core_tile(spec, 3, 3)], 192);
  int64_t total = 0;
  for (const auto& [t, n] : calls) total += n;
  EXPECT_EQ(total, 32 * (32 * 33 / 2));  // every causal (q block, K/V block) pair, once per head
}

// The registry's configuration as the April deployment and the June registry
// ran it (no causal skip, a wait per launch iteration): every one of the 32
// tiles computes its stage's 8 blocks in each of its 128 iterations, 1024.
TEST(AttentionBuilder, CascadeWithoutCausalSkipComputesEveryBlock) {
  const auto spec = npu::DeviceSpec::preset("xdna2");
  const OpShape s = prefill_shape({2048, 0, 32, 8, 64});
  const TileOptions t = {{"cascade", 4}, {"qtiles", 4}, {"bq", 64}, {"bk", 64},
                         {"kv_split", 1}, {"causal_skip", 0}, {"run_iters", 1}};
  const BuiltOp b = op_builder("attention_prefill").build(s, spec, t);
  std::map<npu::TileCoord, int64_t> calls;
  int64_t waits = 0;
  for (const auto& l : b.design.launches) {
    for (const auto& c : l.cores) calls[c.tile] += attn_calls(c.program);
    waits += std::count_if(l.sequence.begin(), l.sequence.end(),
                           [](const npu::DmaTask& d) { return d.after_wait; });
  }
  EXPECT_EQ(calls.size(), 32u);
  for (const auto& [tile, n] : calls) EXPECT_EQ(n, 1024) << tile.col << "," << tile.row;
  EXPECT_EQ(waits, 127);  // 128 iterations in one launch, a wait before each but the first
  for (const TileOptions& bad : {TileOptions{{"cascade", 4}, {"causal_skip", 2}},
                                 TileOptions{{"cascade", 4}, {"kv_split", 1}, {"run_iters", 0}},
                                 TileOptions{{"cascade", 4}, {"kv_split", 1}, {"run_iters", 99}},
                                 TileOptions{{"cascade", 4}, {"run_iters", 1}}})
    EXPECT_THROW(op_builder("attention_prefill").build(s, spec, bad), LimitError);
}

// Seconds the busiest core (the most seconds over all launches) waits on
// single-buffered FIFOs: TileTiming::seconds less its kernel time.
double busiest_stall(const npu::DispatchTiming& d, const npu::DeviceSpec& spec) {
  std::map<npu::TileCoord, std::pair<double, double>> tiles;  // seconds, stall
  for (const auto& l : d.launches)
    for (const auto& t : l.tiles) {
      tiles[t.tile].first += t.seconds;
      tiles[t.tile].second += t.seconds - t.effective_cycles / spec.clock_hz;
    }
  std::pair<double, double> most{0, 0};
  for (const auto& [tile, st] : tiles) most = std::max(most, st);
  return most.second;
}

// The registry configuration with K and V on one stream pays two refill hops
// per block (both objects held through one call); with kv_split K refills
// under attn_pv and V under the next attn_scores, leaving the busiest core
// (stage 0, 960 blocks) about the q capture's hops (NQ per iteration). Same
// blocks, same MACs.
TEST(AttentionBuilder, KvSplitHidesTheKvRefill) {
  const auto spec = npu::DeviceSpec::preset("xdna2");
  const OpShape s = prefill_shape({2048, 0, 32, 8, 64});
  const TileOptions joint = {{"cascade", 4}, {"qtiles", 4}, {"bq", 64}, {"bk", 64}};
  TileOptions split = joint;
  split["kv_split"] = 1;
  const BuiltOp bj = op_builder("attention_prefill").build(s, spec, joint);
  const BuiltOp bs = op_builder("attention_prefill").build(s, spec, split);
  const npu::DispatchTiming tj = npu::estimate_time(bj.design, spec);
  const npu::DispatchTiming ts = npu::estimate_time(bs.design, spec);
  EXPECT_EQ(tj.macs, ts.macs);
  const double hop = 64.0 * 64 * 2 / (spec.stream_bytes_per_cycle * spec.clock_hz);
  const CascadePlan p = plan_attention_cascade(s, spec, split);
  EXPECT_GT(busiest_stall(tj, spec), 0.4 * 960 * hop);  // about one hop per block at least
  EXPECT_LT(busiest_stall(ts, spec), 1.1 * double(p.iters() * p.NQ) * hop);  // the q capture
  EXPECT_LT(ts.total_seconds, tj.total_seconds);
}

// Per launch (the rounds at positions [r0, r0 + rounds_per_launch) of every
// column), the spread between the columns' K/V blocks: a launch lasts as long
// as its busiest column, so this is the causal work the others wait for.
int64_t worst_launch_spread(const PrefillPlan& p) {
  int64_t most = 0, worst = 0;
  for (const auto& col : p.rounds) most = std::max<int64_t>(most, std::ssize(col));
  for (int64_t r0 = 0; r0 < most; r0 += p.rounds_per_launch) {
    int64_t hi = 0, lo = INT64_MAX;
    for (const auto& col : p.rounds) {
      int64_t sum = 0;
      for (int64_t i = r0; i < std::min<int64_t>(std::ssize(col), r0 + p.rounds_per_launch); ++i)
        sum += col[static_cast<size_t>(i)].nkv;
      hi = std::max(hi, sum);
      lo = std::min(lo, sum);
    }
    worst = std::max(worst, hi - lo);
  }
  return worst;
}

// The same rounds dealt in turn (round i of head-major order to column i % C),
// the order the builder used before: the planted imbalance.
PrefillPlan dealt_in_turn(PrefillPlan p) {
  std::vector<PrefillRound> all;
  for (const auto& col : p.rounds) all.insert(all.end(), col.begin(), col.end());
  std::sort(all.begin(), all.end(), [](const PrefillRound& a, const PrefillRound& b) {
    return std::pair(a.h, a.j) < std::pair(b.h, b.j);
  });
  for (auto& col : p.rounds) col.clear();
  for (size_t i = 0; i < all.size(); ++i) p.rounds[i % p.rounds.size()].push_back(all[i]);
  return p;
}

// With as many KV heads as columns (llama-3.2-1b: 8 on xdna2's 8 columns), the
// snake deal hands each column one round of every j group per pass, all with
// the same K/V blocks, so every launch's columns carry exactly the same causal
// work; dealt in turn, column C-1 always holds the latest j and waits for none.
// A ragged GQA shape (2 KV heads, S not a multiple of the blocks) stays within
// the largest round's K/V blocks (derived: a pair of snake passes adds a
// descending and an ascending run of the sorted rounds, so a launch's spread
// telescopes to at most the range of its rounds).
TEST(AttentionBuilder, PrefillRoundsShareTheCausalWorkOfEveryLaunch) {
  const auto spec = npu::DeviceSpec::preset("xdna2");
  const PrefillPlan llama =
      plan_attention_prefill(prefill_shape({2048, 0, 32, 8, 64}), spec, {{"bq", 4}, {"bk", 64}});
  EXPECT_EQ(worst_launch_spread(llama), 0);
  EXPECT_GT(worst_launch_spread(dealt_in_turn(llama)), 0);  // the planted order is caught
  const PrefillPlan ragged = plan_attention_prefill(prefill_shape({1000, 0, 12, 2, 64}), spec,
                                                    {{"bq", 3}, {"bk", 32}});
  int64_t top = 0;
  for (const auto& col : ragged.rounds)
    for (const auto& rd : col) top = std::max(top, rd.nkv);
  EXPECT_LE(worst_launch_spread(ragged), top);
  EXPECT_GT(worst_launch_spread(dealt_in_turn(ragged)), worst_launch_spread(ragged));
}

// Busiest tile over mean tile compute, summed over the launches (1 = every
// tile of every launch does the same causal work).
double tile_imbalance(const BuiltOp& b, const npu::DeviceSpec& spec) {
  ensure_tile_kernels_registered();
  const npu::DispatchTiming t = npu::estimate_time(b.design, spec);
  double busiest = 0, mean = 0;
  for (const auto& l : t.launches) {
    double top = 0, sum = 0;
    for (const auto& tt : l.tiles) {
      top = std::max(top, tt.seconds);
      sum += tt.seconds;
    }
    busiest += top;
    mean += sum / static_cast<double>(l.tiles.size());
  }
  return busiest / mean;
}

// The default bq puts a round's R * bq query positions inside one K/V block,
// so the R tiles of a round see the same blocks (llama-3.2-1b at 2048 tokens:
// 4 rows x 8 positions in blocks of 64 keys) and no tile waits for a busier
// one; the old default (bq = 12: 48 positions straddling blocks) is caught.
TEST(AttentionBuilder, PrefillDefaultRoundSeesOneKvBlockPerTile) {
  const auto spec = npu::DeviceSpec::preset("xdna2");
  const OpShape s = prefill_shape({2048, 0, 32, 8, 64});
  const BuiltOp def = op_builder("attention_prefill").build(s, spec);
  EXPECT_EQ(def.tiles.at("bk") % (def.tiles.at("rows") * def.tiles.at("bq")), 0);
  EXPECT_NEAR(tile_imbalance(def, spec), 1.0, 1e-9);
  const BuiltOp old = op_builder("attention_prefill").build(s, spec, {{"bq", 12}, {"bk", 64}});
  EXPECT_GT(tile_imbalance(old, spec), 1.01);
}

// Every attention shape of every preset at seq 17 (prefill) and seq 1 over
// 1 and 17 keys (decode) builds, validates and has a timing estimate; the
// 2048-token shapes are in attention_builder_slow_test.cpp.
TEST(AttentionBuilder, EveryPresetShortShapeBuildsAndValidates) {
  test::for_each_preset_shape({17}, {1, 17});
}

}  // namespace
}  // namespace tessera::kernels
