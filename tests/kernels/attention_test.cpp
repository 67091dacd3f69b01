// flash_attn (prefill) and decode_attn + attn_merge against a double-precision
// causal attention on the same bf16 inputs.
#include <cstring>

#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "tessera/kernels/flash_attention.h"

namespace tessera::kernels::test {
namespace {

// One KV head and the `group` query heads it serves (the GQA unit a tile owns).
struct Case {
  int64_t seq = 0;     // keys at positions [0, seq)
  int64_t q_rows = 0;  // queries at positions [seq - q_rows, seq)
  int64_t group = 1;
  int64_t head_dim = 64;
  int64_t block = 16;  // K/V rows per block object
};

struct Data {
  std::vector<bf16> q, k, v;  // q [q_rows, group, d], k / v [seq, d]
};

Data make_data(const Case& c, uint32_t seed) {
  return {random_bf16(c.q_rows * c.group * c.head_dim, seed, -2, 2),
          random_bf16(c.seq * c.head_dim, seed + 1, -2, 2),
          random_bf16(c.seq * c.head_dim, seed + 2, -1, 1)};
}

// Scalar reference and its bound. Each softmax weight w_j is off by at most
// E_j relative, with mx the row's max score (scores stay fp32: no rounding
// of s_j itself, so nothing proportional to |s_j|):
//  - the exp operand s_j - m (m = running max <= mx) rounded to bf16:
//    u_bf16 (mx - s_j), plus the bf16 exp result u_bf16 and 2e-6 polynomial;
//  - every online rescale exp_tile(m_old - m_new) after key j was seen
//    multiplies its weight by a bf16 result (u_bf16 + 2e-6 each, `steps` of
//    them) of an operand rounded by u_bf16 |m_old - m_new|; the running max
//    starts >= s_j and only grows to mx, so those operands sum to at most
//    mx - s_j: u_bf16 (mx - s_j) per chain, and each merge adds one more;
//  - the fp32 q.k sum: d u32 scale sum|q||k| (twice: score and max).
// Weights off by E_j move sum w_j v_j / sum w_j by at most
// sum_j w_j E_j |v_j - out| / (1 - sum_j w_j E_j) (the error cancels on a
// constant v);
// the fp32 p.v sum adds (n + 4) u32 sum w_j |v_j|, the bf16 output u_bf16 |out|.
struct Reference {
  std::vector<double> out, bound;
};

Reference reference(const Case& c, const Data& x, int64_t steps, int64_t merges) {
  const int64_t d = c.head_dim, rows = c.q_rows * c.group;
  const double scale = 1.0 / std::sqrt(double(d));
  Reference r{std::vector<double>(rows * d), std::vector<double>(rows * d)};
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t p = c.seq - c.q_rows + row / c.group, n = p + 1;
    std::vector<double> s(n), w(n), e(n);
    double mx = -INFINITY, sum = 0, score_err = 0, emax = 0;
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0, acc_abs = 0;
      for (int64_t i = 0; i < d; ++i) {
        double t = double(bf16_to_f32(x.q[row * d + i])) * bf16_to_f32(x.k[j * d + i]);
        acc += t;
        acc_abs += std::fabs(t);
      }
      s[j] = acc * scale;
      mx = std::max(mx, s[j]);
      score_err = std::max(score_err, d * kU32 * scale * acc_abs);
    }
    for (int64_t j = 0; j < n; ++j) {
      sum += w[j] = std::exp(s[j] - mx);
      // An operand error x makes the weight e^x larger: expm1, not x, once
      // x is not small (keys far below the max, whose weights are ~0 anyway).
      e[j] = std::expm1(kUBf16 * ((mx - s[j]) * double(2 + merges) + 1) +
                        double(steps) * (kUBf16 + 2e-6) + 2e-6 + 2 * score_err);
    }
    for (int64_t j = 0; j < n; ++j) emax += w[j] / sum * e[j];  // the sum's relative error
    for (int64_t i = 0; i < d; ++i) {
      double o = 0, spread = 0, mag = 0;
      for (int64_t j = 0; j < n; ++j) o += w[j] / sum * bf16_to_f32(x.v[j * d + i]);
      for (int64_t j = 0; j < n; ++j) {
        double vj = bf16_to_f32(x.v[j * d + i]);
        spread += w[j] / sum * e[j] * std::fabs(vj - o);
        mag += w[j] / sum * std::fabs(vj);
      }
      const double werr = spread / (1 - emax);
      r.out[row * d + i] = o;
      r.bound[row * d + i] =
          werr + (n + 4) * kU32 * mag * (1 + emax) + kUBf16 * (std::fabs(o) + werr);
    }
  }
  return r;
}

// K/V rows [first, first + count) copied into a block object of c.block rows
// whose unused tail holds huge values: if the kernel read past kv_rows they
// would dominate the softmax and the output.
std::vector<bf16> block_of(const std::vector<bf16>& kv, const Case& c, int64_t first,
                           int64_t count) {
  std::vector<bf16> b(c.block * c.head_dim, f32_to_bf16(3e4f));
  std::copy(kv.begin() + first * c.head_dim, kv.begin() + (first + count) * c.head_dim, b.begin());
  return b;
}

std::vector<float> fresh_state(int64_t rows, int64_t d) {
  std::vector<float> st(attn_state_floats(rows, d), 7.0f);
  run_kernel("attn_init", {{"rows", rows}, {"head_dim", d}}, {bytes_of(st)});
  return st;
}

std::vector<bf16> finalize(std::vector<float>& st, int64_t rows, int64_t d) {
  std::vector<bf16> out(rows * d);
  run_kernel("attn_finalize", {{"rows", rows}, {"head_dim", d}}, {bytes_of(st), bytes_of(out)});
  return out;
}

std::vector<bf16> run_prefill(const Case& c, Data& x) {
  const int64_t rows = c.q_rows * c.group, q_pos0 = c.seq - c.q_rows;
  auto st = fresh_state(rows, c.head_dim);
  for (int64_t k0 = 0; k0 < c.seq; k0 += c.block) {
    const int64_t kv = std::min(c.block, c.seq - k0);
    auto kb = block_of(x.k, c, k0, kv), vb = block_of(x.v, c, k0, kv);
    npu::KernelParams p{{"q_rows", c.q_rows}, {"group", c.group}, {"kv_rows", kv},
                        {"head_dim", c.head_dim}, {"q_pos0", q_pos0}, {"k_pos0", k0}};
    run_kernel("flash_attn", p, {bytes_of(x.q), bytes_of(kb), bytes_of(vb), bytes_of(st)});
  }
  return finalize(st, rows, c.head_dim);
}

TEST(FlashAttention, CausalGqaBlocksMatchScalarReference) {
  uint32_t seed = 300;
  for (int64_t d : {2, 48, 64, 128}) {
    for (int64_t group : {1, 3}) {
      for (auto [seq, q_rows] : {std::pair<int64_t, int64_t>{1, 1}, {17, 17}, {70, 70}, {70, 9}}) {
        Case c{seq, q_rows, group, d, 16};
        Data x = make_data(c, seed += 3);
        auto out = run_prefill(c, x);
        Reference r = reference(c, x, (seq + c.block - 1) / c.block, 0);
        EXPECT_TRUE(within(to_f64(out), r.out, r.bound))
            << "d " << d << " group " << group << " seq " << seq << " q_rows " << q_rows;
      }
    }
  }
}

// Real models reach scores far above fp32's exp overflow (~88.7); q scaled by
// 2^5 (exact in bf16) pushes the largest scores past 100. The bound has no
// |s| term: a kernel that rounds the scores themselves to bf16 (0.25 absolute
// at 100, a 28 % weight error) fails here while passing at small scores.
TEST(FlashAttention, LargeScoresKeepTheBoundOfSmallOnes) {
  uint32_t seed = 900;
  for (int64_t d : {64, 128}) {
    Case c{40, 40, 2, d, 16};
    Data x = make_data(c, seed += 3);
    for (bf16& q : x.q) q = f32_to_bf16(bf16_to_f32(q) * 32.0f);
    auto out = run_prefill(c, x);
    Reference r = reference(c, x, (c.seq + c.block - 1) / c.block, 0);
    double top = 0;
    for (int64_t row = 0; row < c.q_rows * c.group; ++row)
      for (int64_t j = 0; j < c.seq; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < d; ++i)
          acc += double(bf16_to_f32(x.q[row * d + i])) * bf16_to_f32(x.k[j * d + i]);
        top = std::max(top, acc / std::sqrt(double(d)));
      }
    ASSERT_GT(top, 100.0) << "the case must reach large scores";
    EXPECT_TRUE(within(to_f64(out), r.out, r.bound)) << "d " << d;
  }
}

// The context split over `tiles` runs of blocks, each with its own state,
// joined with attn_merge: what a builder does to spread decode over tiles.
TEST(DecodeAttention, SplitContextMergesToTheFullSoftmax) {
  uint32_t seed = 500;
  for (int64_t d : {64, 128}) {
    for (int64_t group : {1, 4, 7}) {
      for (int64_t seq : {1, 33, 200}) {
        Case c{seq, 1, group, d, 32};
        Data x = make_data(c, seed += 3);
        const int64_t blocks = (seq + c.block - 1) / c.block, tiles = 3;
        std::vector<std::vector<float>> states;
        for (int64_t t = 0; t < tiles; ++t) {
          states.push_back(fresh_state(group, d));
          for (int64_t b = t; b < blocks; b += tiles) {  // interleaved blocks per tile
            const int64_t k0 = b * c.block, kv = std::min(c.block, seq - k0);
            auto kb = block_of(x.k, c, k0, kv), vb = block_of(x.v, c, k0, kv);
            run_kernel("decode_attn", {{"group", group}, {"kv_rows", kv}, {"head_dim", d}},
                       {bytes_of(x.q), bytes_of(kb), bytes_of(vb), bytes_of(states[t])});
          }
        }
        for (int64_t t = 1; t < tiles; ++t) {
          run_kernel("attn_merge", {{"rows", group}, {"head_dim", d}},
                     {bytes_of(states[0]), bytes_of(states[t])});
        }
        auto out = finalize(states[0], group, d);
        Reference r = reference(c, x, blocks, tiles - 1);
        EXPECT_TRUE(within(to_f64(out), r.out, r.bound))
            << "d " << d << " group " << group << " seq " << seq;
      }
    }
  }
}

// attn_scores then attn_pv (the split cascade's two calls per K/V block) is
// flash_attn bit for bit: same running state after every block (ragged last
// block, rows that see none of a diagonal block, GQA rows), same output.
TEST(FlashAttention, ScoresThenPvIsFlashAttnBitForBit) {
  uint32_t seed = 700;
  for (int64_t d : {2, 64, 128}) {
    for (int64_t group : {1, 3}) {
      for (auto [seq, q_rows] : {std::pair<int64_t, int64_t>{1, 1}, {37, 37}, {70, 9}}) {
        Case c{seq, q_rows, group, d, 16};
        Data x = make_data(c, seed += 3);
        const int64_t rows = q_rows * group;
        auto whole = fresh_state(rows, d), split = fresh_state(rows, d);
        std::vector<bf16> p(rows * c.block, f32_to_bf16(3e4f));
        for (int64_t k0 = 0; k0 < seq; k0 += c.block) {
          const int64_t kv = std::min(c.block, seq - k0);
          auto kb = block_of(x.k, c, k0, kv), vb = block_of(x.v, c, k0, kv);
          npu::KernelParams prm{{"q_rows", q_rows}, {"group", group},          {"kv_rows", kv},
                                {"head_dim", d},    {"q_pos0", seq - q_rows}, {"k_pos0", k0}};
          run_kernel("flash_attn", prm, {bytes_of(x.q), bytes_of(kb), bytes_of(vb), bytes_of(whole)});
          run_kernel("attn_scores", prm, {bytes_of(x.q), bytes_of(kb), bytes_of(p), bytes_of(split)});
          run_kernel("attn_pv", prm, {bytes_of(p), bytes_of(vb), bytes_of(split)});
          ASSERT_EQ(0, std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)))
              << "d " << d << " group " << group << " seq " << seq << " block at " << k0;
        }
        const auto a = finalize(whole, rows, d), b = finalize(split, rows, d);
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16)));
      }
    }
  }
}

TEST(FlashAttention, AttnCopyCopiesTheObject) {
  auto src = random_bf16(96, 5, -2, 2);
  std::vector<bf16> dst(96, f32_to_bf16(1.0f));
  run_kernel("attn_copy", {{"elems", 96}}, {bytes_of(src), bytes_of(dst)});
  EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), src.size() * sizeof(bf16)));
}

TEST(FlashAttention, RowThatSawNoKeyIsAnError) {
  Case c{8, 1, 1, 64, 8};
  Data x = make_data(c, 9);
  auto st = fresh_state(1, 64);
  // Query at position 0, keys at positions 4..11: all in its future.
  npu::KernelParams p{{"q_rows", 1}, {"group", 1}, {"kv_rows", 8}, {"head_dim", 64},
                      {"q_pos0", 0}, {"k_pos0", 4}};
  run_kernel("flash_attn", p, {bytes_of(x.q), bytes_of(x.k), bytes_of(x.v), bytes_of(st)});
  EXPECT_THROW(finalize(st, 1, 64), KernelNumericError);
}

TEST(DecodeAttention, RejectsCausalOrSeveralQueries) {
  npu::KernelParams p{{"group", 1}, {"kv_rows", 8}, {"head_dim", 64}, {"q_rows", 2}};
  EXPECT_THROW(tile_kernel_l1_bytes("decode_attn", p), KernelArgError);
}

// A replay calls KernelDef::replay, which skips run()'s checks and reads the
// params bound once, on args a checked run() accepted: it must write what
// run() writes, bit for bit, for decode_attn (a ragged block of 5 rows) and
// the state kernels around it.
TEST(DecodeAttention, ReplayEntriesWriteWhatRunWrites) {
  const int64_t group = 3, d = 16, kv = 5, sf = attn_state_floats(group, d);
  auto state = [&](uint32_t seed) {  // a state decode_attn already wrote into: finite, sums > 0
    std::vector<float> s(static_cast<size_t>(sf));
    std::vector<bf16> q = random_bf16(group * d, seed, -2, 2), k = random_bf16(kv * d, seed + 1, -2, 2),
                      v = random_bf16(kv * d, seed + 2);
    run_kernel("attn_init", {{"rows", group}, {"head_dim", d}}, {bytes_of(s)});
    run_kernel("decode_attn", {{"group", group}, {"kv_rows", kv}, {"head_dim", d}},
               {bytes_of(q), bytes_of(k), bytes_of(v), bytes_of(s)});
    return s;
  };
  struct Arg {
    std::vector<bf16> b;
    std::vector<float> f;
    std::span<std::byte> bytes() { return f.empty() ? bytes_of(b) : bytes_of(f); }
  };
  struct Call {
    std::string kernel;
    npu::KernelParams params;
    std::vector<Arg> args;
  };
  std::vector<Call> cases = {
      {"decode_attn", {{"group", group}, {"kv_rows", kv}, {"head_dim", d}},
       {{random_bf16(group * d, 1, -2, 2), {}}, {random_bf16(kv * d, 2, -2, 2), {}}, {random_bf16(kv * d, 3), {}},
        {{}, state(4)}}},
      {"attn_init", {{"rows", group}, {"head_dim", d}}, {{{}, state(5)}}},
      {"attn_merge", {{"rows", group}, {"head_dim", d}}, {{{}, state(6)}, {{}, state(7)}}},
      {"attn_finalize", {{"rows", group}, {"head_dim", d}}, {{{}, state(8)}, {std::vector<bf16>(group * d), {}}}}};
  for (Call& c : cases) {
    const npu::KernelDef& def = registry().get(c.kernel);
    ASSERT_NE(def.replay, nullptr) << c.kernel;
    ASSERT_TRUE(def.bind) << c.kernel;
    const std::shared_ptr<const void> bound = def.bind(c.params);
    std::vector<Arg> ran = c.args, replayed = c.args;
    auto call = [&](std::vector<Arg>& args, bool replay) {
      std::vector<std::span<std::byte>> spans;
      for (Arg& a : args) spans.push_back(a.bytes());
      call_kernel(def, c.params, bound.get(), std::move(spans), replay);
    };
    call(ran, false);
    call(replayed, true);
    for (size_t a = 0; a < ran.size(); ++a) {
      const auto x = ran[a].bytes(), y = replayed[a].bytes();
      ASSERT_EQ(x.size(), y.size());
      EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size()), 0) << c.kernel << " arg " << a;
    }
  }
}

}  // namespace
}  // namespace tessera::kernels::test
