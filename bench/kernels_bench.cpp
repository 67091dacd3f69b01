// Host speed of the tile kernel bodies (what the simulator spends its time in):
// FLOP/s of the GEMM block, GEMV and the attention kernels, called directly on
// L1-sized objects. Reported as numbers, never a correctness gate.
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "tessera/core/bf16.h"
#include "tessera/kernels/flash_attention.h"
#include "tessera/kernels/gemm.h"
#include "tessera/kernels/gemv.h"

namespace {

using tessera::bf16;
namespace k = tessera::kernels;

std::vector<bf16> data(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<bf16> v(n);
  for (auto& x : v) x = tessera::f32_to_bf16(d(rng));
  return v;
}

void flops(benchmark::State& state, double per_iteration) {
  state.counters["FLOP/s"] =
      benchmark::Counter(per_iteration, benchmark::Counter::kIsIterationInvariantRate);
}

// gemm_acc on an m x k x n block (args: m = k = n), B in [k, n] or [n, k].
void BM_GemmBlock(benchmark::State& state) {
  const int64_t s = state.range(0);
  k::GemmDims d{s, s, s, state.range(1) != 0};
  auto a = data(s * s, 1), b = data(s * s, 2);
  std::vector<float> acc(s * s);
  for (auto _ : state) {
    k::gemm_block(a.data(), b.data(), acc.data(), d, true);
    benchmark::DoNotOptimize(acc.data());
  }
  flops(state, 2.0 * s * s * s);
}
BENCHMARK(BM_GemmBlock)->Args({32, 0})->Args({64, 0})->Args({64, 1})->Args({128, 0});

// Decode projection: one token through an n x k weight block.
void BM_Gemv(benchmark::State& state) {
  const int64_t n = state.range(0), kk = state.range(1);
  auto w = data(n * kk, 3), x = data(kk, 4);
  std::vector<float> acc(n);
  for (auto _ : state) {
    k::gemv_block(w.data(), x.data(), acc.data(), n, kk, false);
    benchmark::DoNotOptimize(acc.data());
  }
  flops(state, 2.0 * n * kk);
}
// {2, 256}: what the tile search picks for decode GEMVs (n rows x k per call).
BENCHMARK(BM_Gemv)->Args({64, 2048})->Args({256, 2048})->Args({2, 256})->Args({4, 128});

// One flash_attn block: q_rows positions x group heads against kv_rows keys
// (causal off so every score is computed), head_dim from the arg.
void BM_FlashAttnBlock(benchmark::State& state) {
  k::AttnBlock b;
  b.q_rows = state.range(0);
  b.group = 4;
  b.kv_rows = 64;
  b.head_dim = state.range(1);
  b.causal = false;
  b.scale = 0.125f;
  const int64_t rows = b.q_rows * b.group;
  auto q = data(rows * b.head_dim, 5), kv = data(b.kv_rows * b.head_dim, 6);
  std::vector<float> st(k::attn_state_floats(rows, b.head_dim));
  k::attn_state_init(st.data(), rows, b.head_dim);
  for (auto _ : state) {
    k::attn_block(q.data(), kv.data(), kv.data(), st.data(), b);
    benchmark::DoNotOptimize(st.data());
  }
  flops(state, 4.0 * rows * b.kv_rows * b.head_dim);
}
BENCHMARK(BM_FlashAttnBlock)->Args({16, 64})->Args({16, 128})->Args({1, 64});

}  // namespace

BENCHMARK_MAIN();
