// The published Llama-3.2-1B figures as predictions of designs, and the fit of
// the timing model's physical fields to them (calibration.h).
#include "tessera/compiler/calibration.h"

#include <cmath>
#include <set>

#include <fmt/format.h>

#include "tessera/compiler/plan.h"
#include "tessera/compiler/style_published.h"
#include "tessera/core/error.h"
#include "tessera/model/config.h"
#include "tessera/npu/timing.h"

namespace tessera::compiler {
namespace {

constexpr const char* kRef = "published-llama-3.2-1b.md";
// Decode figures: position of the decode step. Not published; a short prompt
// (mlir-air pads to 2048 but attends over the real positions), stated in
// docs/calibration.md.
constexpr int64_t kDecodeAt = 256;

kernels::OpShape shape(const std::string& op, std::map<std::string, int64_t> dims,
                       std::map<std::string, double> attrs = {}) {
  return {op, std::move(dims), std::move(attrs)};
}

struct Registry {
  const char* name;
  kernels::OpShape shape;
  kernels::TileOptions tiles;
  const char* config;
  double seconds;
  bool single = false;  // compiled with omit_pingpong (omit_pingpong())
};

std::vector<Registry> registry_figures(const model::ModelConfig& c) {
  const int64_t S = 2048, H = c.hidden_size, I = c.intermediate_size, kv = c.kv_dim();
  const kernels::TileOptions gemm = {{"gemm", 1}, {"m", 64}, {"k", 32}, {"n", 64}};
  const kernels::TileOptions gemv = {{"gemm", 0}, {"columns", 8}, {"rows", 1}};
  const double eps = c.rms_norm_eps, scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  return {
      {"registry GEMM Q/O 2048^3", shape("linear", {{"M", S}, {"K", H}, {"N", H}}), gemm,
       "m64 k32 n64 on 8x4 (source: tile (64,256,32,64); the L2 K tile 256 is not expressible)",
       2.79e-3},
      {"registry GEMM K/V 2048x2048x512", shape("linear", {{"M", S}, {"K", H}, {"N", kv}}), gemm,
       "m64 k32 n64 on 8x4 (source: n 128 on a herd mapping N to rows; the builder maps N to "
       "columns, so n 64 keeps all 32 tiles busy)",
       0.75e-3},
      {"registry GEMM gate/up 2048x2048x8192", shape("linear", {{"M", S}, {"K", H}, {"N", I}}),
       gemm, "m64 k32 n64 on 8x4 (source lists no tiles; Q/O's)", 10.86e-3},
      {"registry GEMM down 2048x8192x2048", shape("linear", {{"M", S}, {"K", I}, {"N", H}}), gemm,
       "m64 k32 n64 on 8x4 (source: tile (64,256,32,64))", 10.10e-3},
      {"registry RMSNorm 2048x2048", shape("rmsnorm", {{"M", S}, {"H", H}}, {{"eps", eps}}),
       {{"rows", 1}}, "herd 8x1", 0.899e-3},
      {"registry RoPE-Q 65536x64", shape("rope", {{"M", S}, {"heads", c.num_heads}, {"head_dim", c.head_dim}}),
       {{"rows", 1}}, "herd 8x1, half-split", 0.634e-3},
      {"registry FlashAttention prefill",
       shape("attention_prefill", {{"S", S}, {"P", 0}, {"heads", c.num_heads},
                                   {"kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim}},
             {{"scale", scale}}),
       {{"cascade", 4}, {"qtiles", 4}, {"bq", 64}, {"bk", 64}, {"kv_split", 1}, {"causal_skip", 0},
        {"run_iters", 1}},
       "the source's: LQP 256 = 4 q tiles x 64 rows, LKP 64, cascade 4, 2 heads per iteration "
       "(32 tiles), K and V on their own single-buffered streams (QK2L1 / V2L1); every K/V block "
       "computed, the masked ones masked (no causal_skip before mlir-air 5caadbfbf), and a wait "
       "after every launch iteration (runtime_loop_tiling_sizes [1, 1])",
       15.3e-3},
      {"registry GEMV Q 2048x2048", shape("linear", {{"M", 1}, {"K", H}, {"N", H}}), gemv,
       "8 cores (herd_m 8), builder's rows per call (source: tile_m 8, m_input 4); "
       "omit_pingpong (matvec.py's runner)", 321e-6, true},
      {"registry GEMV gate/up 8192x2048", shape("linear", {{"M", 1}, {"K", H}, {"N", I}}), gemv,
       "8 cores (herd_m 8), builder's rows per call; omit_pingpong", 1155e-6, true},
      {"registry GEMV down 2048x8192", shape("linear", {{"M", 1}, {"K", I}, {"N", H}}), gemv,
       "8 cores (herd_m 8), builder's rows per call (source: tile_m 2); omit_pingpong", 1038e-6,
       true},
  };
}

// The host's share of a plan's runtime calls: copies into BOs and their syncs.
double bo_write_seconds(const std::vector<StyleStep>& steps, const npu::DeviceSpec& s) {
  double t = 0;
  for (const StyleStep& st : steps)
    t += static_cast<double>(st.repeat) *
         (static_cast<double>(st.copy_bytes) / s.host_copy_bytes_per_second +
          static_cast<double>(st.sync_bytes) / s.host_sync_bytes_per_second);
  return t;
}

void add_kernels(std::set<std::string>& out, const npu::Design& d) {
  for (auto& k : npu::called_kernels(d)) out.insert(k);
}

}  // namespace

LlamaFigures::LlamaFigures(const npu::DeviceSpec& base) {
  const model::ModelConfig c = model::preset("llama-3.2-1b");
  auto cache = std::make_shared<DesignCache>(base);
  std::set<std::string> kernels;
  for (const Registry& r : registry_figures(c)) {
    auto op = cache->get(r.shape, r.tiles).op;
    if (r.single) op = omit_pingpong(*op, base);
    add_kernels(kernels, op->design);
    figures_.push_back({r.name, "registry", r.config, std::string(kRef) + " kernel registry",
                        r.seconds, true, [op](TimingMemo& m) {
                          const npu::DispatchTiming& t = m.get(op->design);
                          return FigurePrediction{t.total_seconds, t.bound};
                        }});
  }
  auto air = std::make_shared<StylePlan>(
      plan_published(c, PublishedStyle::mlir_air, 2048, kDecodeAt, *cache));
  auto iron = std::make_shared<StylePlan>(
      plan_published(c, PublishedStyle::iron, 2048, kDecodeAt, *cache));
  for (const auto* p : {air.get(), iron.get()})
    for (const auto* steps : {&p->prefill, &p->decode})
      for (const auto& st : *steps)
        for (const auto& l : st.launches) add_kernels(kernels, l.op->design);
  notes_ = air->notes;
  struct AirStep {
    const char* name;
    const char* step;
    bool decode;
    double seconds;
    bool fitted = true;
  };
  const AirStep steps[] = {
      {"dispatch rms_gemms_rope (prefill)", "rms_gemms_rope", false, 7.3e-3},
      {"dispatch flash_attn (prefill)", "flash_attn", false, 21.6e-3},
      {"dispatch o_ffn (prefill)", "o_ffn", false, 41.0e-3},
      {"K/V copy-out per layer (prefill)", "kv_copy_out", false, 1.1e-3},
      {"LM head 8 partitions (prefill)", "lm_head", false, 13.6e-3},
      // Predicted, not fitted: about half of it is in no term of the model, and
      // fitted it pulls DDR and the DMA object cost to their bounds
      // (docs/calibration.md, part E).
      {"dispatch rms_gemv_rope (decode)", "rms_gemv_rope", true, 0.9e-3, false},
      {"CPU attention per layer (decode)", "cpu_attention", true, 0.3e-3},
      {"dispatch o_gemv_ffn (decode)", "o_gemv_ffn", true, 3.6e-3},
      {"LM head 8 partitions (decode)", "lm_head", true, 13.5e-3},
  };
  for (const AirStep& st : steps) {
    const StyleStep* s = &air->step(st.step, st.decode);
    figures_.push_back({st.name, "dispatch", "tessera plan --style mlir-air",
                        std::string(kRef) + " per-dispatch times (April 2026)", st.seconds, st.fitted,
                        [air, s](TimingMemo& m) {
                          const StepTime t = time_step(*s, m);
                          return FigurePrediction{t.seconds, t.bound};
                        }});
  }
  // April prefill split: the buffer-object writes of the 49 runtime calls.
  figures_.push_back({"mlir-air BO writes per prefill (46 ms)", "dispatch",
                      "tessera plan --style mlir-air: copy + to-device sync of written inputs",
                      std::string(kRef) + " prefill split (April 2026)", 46e-3, true,
                      [air](TimingMemo& m) {
                        return FigurePrediction{bo_write_seconds(air->prefill, m.spec()), "host"};
                      }});
  auto total = [](std::shared_ptr<StylePlan> p, bool decode) {
    return [p, decode](TimingMemo& m) {
      return FigurePrediction{StylePlan::seconds(decode ? p->decode : p->prefill, m), "sum"};
    };
  };
  const char* e2e = "end to end, seq 2048";
  figures_.push_back({"mlir-air prefill (April, 1.30 s NPU kernel time)", "end-to-end",
                      "tessera plan --style mlir-air", e2e, 1.30, true, total(air, false)});
  figures_.push_back({"mlir-air TTFT (June, 1.21 s)", "end-to-end", "tessera plan --style mlir-air",
                      e2e, 1.21, true, total(air, false)});
  figures_.push_back({"mlir-air decode (April, 92 ms/token)", "end-to-end",
                      "tessera plan --style mlir-air", e2e, 92e-3, true, total(air, true)});
  figures_.push_back({"mlir-air decode (June, 12.2 tok/s)", "end-to-end",
                      "tessera plan --style mlir-air", e2e, 1 / 12.2, true, total(air, true)});
  figures_.push_back({"IRON prefill 2048 (2.744 s)", "end-to-end", "tessera plan --style iron",
                      e2e, 2.744, false, total(iron, false)});
  figures_.push_back({"IRON decode (370 ms/token)", "end-to-end", "tessera plan --style iron", e2e,
                      0.370, false, total(iron, true)});
  kernels_.assign(kernels.begin(), kernels.end());
}

// dispatch_overhead_seconds is measured directly (43.7-50.1 us, the dispatch
// microbenchmark); fitted to composite figures it drifted to 91 us, twice the
// measurement, so it stays at its sourced value. ddr_bytes_per_second too
// (60 GB/s sourced, memcpy 66.6): with single buffers modelled the LM head
// pulled it to its 45 GB/s floor, a third below the memcpy measurement.
const std::vector<std::string>& fitted_fields() {
  static const std::vector<std::string> f = {
      "vector_lanes_per_cycle",   "gemv_macs_per_cycle",     "mmul_loop_overhead_cycles",
      "core_call_overhead_cycles",
      "dma_object_overhead_cycles",
      "host_bytes_per_second",    "host_call_overhead_seconds", "host_copy_bytes_per_second"};
  return f;
}

namespace {

double& field(npu::DeviceSpec& s, const std::string& name) {
  if (name == "vector_lanes_per_cycle") return s.vector_lanes_per_cycle;
  if (name == "gemv_macs_per_cycle") return s.gemv_macs_per_cycle;
  if (name == "mmul_loop_overhead_cycles") return s.mmul_loop_overhead_cycles;
  if (name == "core_call_overhead_cycles") return s.core_call_overhead_cycles;
  if (name == "dma_object_overhead_cycles") return s.dma_object_overhead_cycles;
  if (name == "host_bytes_per_second") return s.host_bytes_per_second;
  if (name == "host_call_overhead_seconds") return s.host_call_overhead_seconds;
  if (name == "host_copy_bytes_per_second") return s.host_copy_bytes_per_second;
  throw_error<InternalError>("calibration: no fitted field '{}'", name);
}

// 25 points over the published range: geometric where the range spans more
// than a factor of 4 (and starts above 0), linear otherwise.
std::vector<double> grid(const npu::DeviceSpec& s, const std::string& name) {
  for (const auto& f : npu::field_sources(s.family)) {
    if (f.field != name) continue;
    std::vector<double> g;
    const int n = 25;
    const bool geo = f.min > 0 && f.max / f.min > 4;
    for (int i = 0; i < n; ++i) {
      const double t = i / double(n - 1);
      g.push_back(geo ? f.min * std::pow(f.max / f.min, t) : f.min + (f.max - f.min) * t);
    }
    return g;
  }
  throw_error<InternalError>("calibration: field '{}' has no published range", name);
}

double loss(const LlamaFigures& figs, const npu::DeviceSpec& s, int skip) {
  double sum = 0;
  const auto& f = figs.figures();
  TimingMemo memo(s);
  for (size_t i = 0; i < f.size(); ++i) {
    if (static_cast<int>(i) == skip || !f[i].fitted) continue;
    const double e = std::log(f[i].predict(memo).seconds / f[i].published_seconds);
    sum += e * e;
  }
  return sum;
}

}  // namespace

FitResult fit(const LlamaFigures& figs, const npu::DeviceSpec& start, int skip, int sweeps) {
  FitResult r;
  r.spec = start;
  r.loss_before = r.loss_after = loss(figs, start, skip);
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    bool improved = false;
    for (const auto& name : fitted_fields()) {
      npu::DeviceSpec trial = r.spec;
      for (double v : grid(start, name)) {
        field(trial, name) = v;
        const double l = loss(figs, trial, skip);
        if (l < r.loss_after * (1 - 1e-9)) {
          r.loss_after = l;
          field(r.spec, name) = v;
          improved = true;
        }
      }
    }
    if (!improved) break;
  }
  r.spec.validate();
  return r;
}

std::vector<LeaveOneOut> leave_one_out(const LlamaFigures& figs, const npu::DeviceSpec& fitted) {
  std::vector<LeaveOneOut> out;
  const auto& f = figs.figures();
  for (size_t i = 0; i < f.size(); ++i) {
    if (!f[i].fitted) continue;
    // Warm start from the full fit: the search only has to move away from it.
    const FitResult r = fit(figs, fitted, static_cast<int>(i), 2);
    out.push_back({f[i].name, f[i].published_seconds, f[i](r.spec).seconds});
  }
  return out;
}

}  // namespace tessera::compiler
