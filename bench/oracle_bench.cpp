// Oracle speed on full-size shapes with synthetic weights: prefill tokens/s for
// a 128-token prompt, decode tokens/s after it, and peak RSS. Synthetic models
// are written once to $TESSERA_BENCH_DIR (default /tmp/tessera-bench).
//   build/bench/oracle_bench --benchmark_filter=qwen3
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "tessera/core/quant_blocks.h"
#include "tessera/model/model_dir.h"
#include "tessera/model/synth.h"
#include "tessera/oracle/ops.h"
#include "tessera/oracle/oracle.h"

namespace {

namespace fs = std::filesystem;
constexpr int kPrompt = 128;

struct Loaded {
  std::string preset;
  std::unique_ptr<tessera::oracle::Oracle> oracle;
};

// One model in memory at a time: a 1B model holds ~5 GB of F32 weights.
tessera::oracle::Oracle& oracle_for(const std::string& preset) {
  static Loaded loaded;
  if (loaded.preset == preset) return *loaded.oracle;
  loaded.oracle.reset();
  const char* env = std::getenv("TESSERA_BENCH_DIR");
  const fs::path dir = fs::path(env ? env : "/tmp/tessera-bench") / preset;
  if (!fs::exists(dir / "config.json"))
    tessera::model::write_synthetic_model(tessera::model::preset(preset), dir, 1);
  const auto md = tessera::model::load_model_dir(dir);
  loaded.oracle = std::make_unique<tessera::oracle::Oracle>(md.config, md.weights);
  loaded.preset = preset;
  return *loaded.oracle;
}

std::vector<int32_t> prompt_tokens(int64_t vocab) {
  std::vector<int32_t> t(kPrompt);
  for (int i = 0; i < kPrompt; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % vocab);
  return t;
}

void report_rss(benchmark::State& state) {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  state.counters["peak_rss_MB"] = static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is KiB
}

void BM_OraclePrefill(benchmark::State& state, const std::string& preset) {
  auto& o = oracle_for(preset);
  const auto tokens = prompt_tokens(o.config().vocab_size);
  for (auto _ : state) {
    auto cache = o.new_cache();
    benchmark::DoNotOptimize(o.forward(tokens, cache));
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kPrompt, benchmark::Counter::kIsRate);
  report_rss(state);
}

void BM_OracleDecode(benchmark::State& state, const std::string& preset) {
  auto& o = oracle_for(preset);
  auto cache = o.new_cache();
  o.forward(prompt_tokens(o.config().vocab_size), cache);
  int32_t next = 1;
  for (auto _ : state) {
    auto logits = o.forward(std::span(&next, 1), cache);
    next = static_cast<int32_t>(cache.length() % 1000);
    benchmark::DoNotOptimize(logits);
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  report_rss(state);
}

// Decode's matrix-vector product alone, as a share of memory speed: the bytes
// of the weight matrix read per second (compare bench/membw_bench on the same
// machine). Shapes: SmolLM2-135M's LM head and llama-3.2-1b's gate.
void BM_OracleGemv(benchmark::State& state, tessera::DType dtype) {
  const int64_t out = state.range(0), in = state.range(1);
  std::vector<float> wv(static_cast<size_t>(out * in)), x(static_cast<size_t>(in)), y(static_cast<size_t>(out));
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) * 0.25f;
  const tessera::Tensor w = tessera::Tensor::from_f32({out, in}, wv).to(dtype);
  for (auto _ : state) {
    tessera::oracle::linear(x.data(), 1, in, w, out, nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.nbytes()));
}
BENCHMARK_CAPTURE(BM_OracleGemv, f32, tessera::DType::f32)
    ->Args({49152, 576})->Args({8192, 2048})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_OracleGemv, bf16, tessera::DType::bf16)
    ->Args({49152, 576})->Args({8192, 2048})->Unit(benchmark::kMillisecond)->UseRealTime();

// One block-format decode kernel on one thread, as the bytes of blocks read
// per second: SmolLM2-135M's up (1536 x 576) and down (576 x 1536) shapes,
// cycled over `copies` matrices (1: in cache; 64: about 23 MB of Q4_1 and
// 38 MB of Q8_0, from memory). Scales are valid f16, nibbles random.
void BM_OracleBlockGemv(benchmark::State& state, tessera::DType dtype, tessera::oracle::detail::BlockKernel k) {
  using namespace tessera;
  if (!oracle::detail::block_kernel_runs(k)) {
    state.SkipWithError("kernel not supported on this CPU");
    return;
  }
  const int64_t out = state.range(0), in = state.range(1), copies = state.range(2);
  const size_t row_bytes = static_cast<size_t>(in / kQuantBlock) * dtype_block_bytes(dtype);
  const size_t bytes = static_cast<size_t>(out) * row_bytes;
  std::vector<std::byte> w(bytes * static_cast<size_t>(copies));
  uint32_t seed = 7;
  for (auto& b : w) b = static_cast<std::byte>((seed = seed * 1664525u + 1013904223u) >> 24);
  const uint16_t one = 0x3C00;  // f16 1.0: every block's scale (and Q4_1's min)
  for (size_t b = 0; b < w.size(); b += dtype_block_bytes(dtype)) {
    std::memcpy(&w[b], &one, 2);
    if (dtype == DType::q4_1) std::memcpy(&w[b + 2], &one, 2);
  }
  std::vector<float> x(static_cast<size_t>(in)), y(static_cast<size_t>(out));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) * 0.25f;
  int64_t c = 0;
  for (auto _ : state) {
    oracle::detail::gemv_blocks(k, dtype, x.data(), in, w.data() + static_cast<size_t>(c) * bytes, out, y.data());
    c = (c + 1) % copies;
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}
BENCHMARK_CAPTURE(BM_OracleBlockGemv, q4_1_avx512, tessera::DType::q4_1, tessera::oracle::detail::BlockKernel::avx512)
    ->Args({1536, 576, 1})->Args({576, 1536, 1})->Args({1536, 576, 64})->Args({576, 1536, 64});
BENCHMARK_CAPTURE(BM_OracleBlockGemv, q8_0_avx512, tessera::DType::q8_0, tessera::oracle::detail::BlockKernel::avx512)
    ->Args({1536, 576, 1})->Args({1536, 576, 64});

BENCHMARK_CAPTURE(BM_OraclePrefill, qwen3_0_6b, std::string("qwen3-0.6b"))
    ->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();
BENCHMARK_CAPTURE(BM_OracleDecode, qwen3_0_6b, std::string("qwen3-0.6b"))
    ->Unit(benchmark::kMillisecond)->Iterations(16)->UseRealTime();
BENCHMARK_CAPTURE(BM_OraclePrefill, llama_3_2_1b, std::string("llama-3.2-1b"))
    ->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();
BENCHMARK_CAPTURE(BM_OracleDecode, llama_3_2_1b, std::string("llama-3.2-1b"))
    ->Unit(benchmark::kMillisecond)->Iterations(16)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
