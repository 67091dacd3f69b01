// Host time of a decode session's plan work (issue 16), with the design cache
// warm as a session's is after its first token: lowering a decode plan (what
// a session does at each power-of-two bucket of cache lengths: the pass
// pipeline's greedy trials, not the designs, which are cached) and
// retargeting it to the next position (what it does at every token).
#include <benchmark/benchmark.h>

#include "tessera/compiler/plan.h"
#include "tessera/compiler/retarget.h"
#include "tessera/model/config.h"
#include "tessera/npu/device_spec.h"

namespace tessera::compiler {
namespace {

// A decode plan at P = 17 (a 17-token prompt's first token), lowered again
// with every design it needs already in the cache.
void BM_DecodeLowering(benchmark::State& state, const std::string& preset) {
  const model::ModelConfig config = model::preset(preset);
  DesignCache cache(npu::DeviceSpec::preset("xdna2"));
  const Plan first = lower(config, 1, 17, cache);
  for (auto _ : state) {
    Plan p = lower(config, 1, 17, cache);
    benchmark::DoNotOptimize(p.steps.data());
  }
  benchmark::DoNotOptimize(first.steps.data());
}
BENCHMARK_CAPTURE(BM_DecodeLowering, smollm2_135m, std::string("smollm2-135m"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DecodeLowering, llama_3_2_1b, std::string("llama-3.2-1b"))->Unit(benchmark::kMillisecond);

// One position forward and back inside a bucket (P = 17 <-> 18), designs for
// both cached: the per-token retarget without its two design builds.
void BM_DecodeRetarget(benchmark::State& state, const std::string& preset) {
  const model::ModelConfig config = model::preset(preset);
  DesignCache cache(npu::DeviceSpec::preset("xdna2"));
  Plan p = lower(config, 1, 17, cache);
  retarget_in_place(p, config, 18, cache);
  int64_t past = 17;
  for (auto _ : state) {
    retarget_in_place(p, config, past, cache);
    past = past == 17 ? 18 : 17;
  }
}
BENCHMARK_CAPTURE(BM_DecodeRetarget, smollm2_135m, std::string("smollm2-135m"))->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera::compiler

BENCHMARK_MAIN();
