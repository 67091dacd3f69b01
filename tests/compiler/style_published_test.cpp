// The published-system plan styles at the timing level: structure, the fused
// dispatch's cost formula, the IRON buffer-object syncs and the model bounds.
#include <gtest/gtest.h>

#include <set>

#include "tessera/compiler/style_published.h"
#include "tessera/model/config.h"
#include "tessera/npu/designs.h"
#include "tessera/npu/timing.h"

namespace tessera::compiler {
namespace {

const model::ModelConfig& tiny() {
  static const model::ModelConfig c = model::preset("tiny");
  return c;
}

TEST(StylePublished, MlirAirFusesPadsAndKeepsGlueOnTheHost) {
  DesignCache cache(npu::DeviceSpec::preset("xdna2"));
  const StylePlan p = plan_published(tiny(), PublishedStyle::mlir_air, 64, 64, cache);
  EXPECT_EQ(p.seq, 2048);  // prompts padded to 2048 rows
  EXPECT_EQ(p.hidden % 1024, 0);
  EXPECT_EQ(p.dispatches_per_layer(p.prefill), 3);
  EXPECT_EQ(p.dispatches_per_layer(p.decode), 2);
  EXPECT_FALSE(p.step("cpu_attention", true).npu);
  EXPECT_EQ(p.step("lm_head", true).launches.size(), 8u);
  EXPECT_EQ(p.step("rms_gemms_rope", false).launches.size(), 6u);
}

// A fused dispatch = one dispatch overhead + reconfiguration per extra launch
// + each launch's own time without its overhead.
TEST(StylePublished, FusedDispatchPaysOneOverhead) {
  const npu::DeviceSpec spec = npu::DeviceSpec::preset("xdna2");
  DesignCache cache(spec);
  const StylePlan p = plan_published(tiny(), PublishedStyle::mlir_air, 64, 64, cache);
  const StyleStep& s = p.step("o_ffn", false);
  const double host = s.sync_bytes / spec.host_sync_bytes_per_second +
                     s.copy_bytes / spec.host_copy_bytes_per_second;
  double want = spec.dispatch_overhead_seconds + spec.reconfigure_seconds * (s.launches.size() - 1) + host;
  for (const auto& l : s.launches) {
    const npu::DispatchTiming t = npu::estimate_time(l.op->design, spec);
    want += t.total_seconds - t.overhead_seconds;
  }
  EXPECT_NEAR(time_step(s, spec).seconds, want, 1e-12);
  double separate = 0;
  for (const auto& l : s.launches) separate += npu::estimate_time(l.op->design, spec).total_seconds;
  EXPECT_LT(time_step(s, spec).seconds - host, separate);  // the host writes come on top
}

// mlir-air writes only the activations a dispatch reads from outside it (the
// residual stream, q/k/v for attention, attn_out + residual for o_ffn), never
// weights or intermediates, and makes no Python call per dispatch.
TEST(StylePublished, MlirAirWritesOnlyExternalActivations) {
  DesignCache cache(npu::DeviceSpec::preset("xdna2"));
  const StylePlan p = plan_published(tiny(), PublishedStyle::mlir_air, 64, 64, cache);
  const int64_t S = p.seq, H = p.hidden, kvd = tiny().kv_dim();
  EXPECT_EQ(p.step("rms_gemms_rope", false).copy_bytes, S * H * 2);
  EXPECT_EQ(p.step("flash_attn", false).copy_bytes, S * (tiny().q_dim() + 2 * kvd) * 2);
  EXPECT_EQ(p.step("o_ffn", false).copy_bytes, S * (tiny().q_dim() + H) * 2);  // attn_out, residual
  EXPECT_EQ(p.step("o_ffn", false).sync_bytes, p.step("o_ffn", false).copy_bytes);
  EXPECT_EQ(p.step("o_gemv_ffn", true).host_calls, 0);
}

// IRON's run_runlist syncs every BO of the runlist both ways, weights
// included; forward() copies the activation input in and the output out.
TEST(StylePublished, IronSyncsEveryBufferObjectBothWays) {
  DesignCache cache(npu::DeviceSpec::preset("xdna2"));
  const StylePlan p = plan_published(tiny(), PublishedStyle::iron, 64, 64, cache);
  const int64_t S = p.seq, H = tiny().hidden_size, I = tiny().intermediate_size;
  const StyleStep& q = p.step("q", false);
  const int64_t x = S * H * 2, w = H * tiny().q_dim() * 2, y = S * tiny().q_dim() * 2;
  EXPECT_EQ(q.sync_bytes, 2 * (w + x + y));
  EXPECT_EQ(q.copy_bytes, x + y);
  EXPECT_EQ(q.host_calls, 1);
  // torch_to_numpy / numpy_to_torch: bf16 -> fp32 -> bf16, 12 bytes per element.
  EXPECT_EQ(q.convert_bytes, 6 * (x + y));
  // SwiGLU's runlist: gate, up and act outputs stay in BOs (synced, not copied).
  const StyleStep& f = p.step("swiglu", false);
  EXPECT_EQ(f.copy_bytes, 2 * x);
  EXPECT_EQ(f.sync_bytes, 2 * (3 * H * I * 2 + 2 * x + 3 * S * I * 2));
}

// IRON round-trips activations through host DDR: its dispatches sync bytes,
// and a slower cache flush makes them slower.
TEST(StylePublished, IronPaysBufferSyncPerDispatch) {
  npu::DeviceSpec spec = npu::DeviceSpec::preset("xdna2");
  DesignCache cache(spec);
  const StylePlan p = plan_published(tiny(), PublishedStyle::iron, 64, 64, cache);
  EXPECT_GE(p.dispatches_per_layer(p.prefill), 11);
  const StyleStep& q = p.step("q", false);
  EXPECT_GT(q.sync_bytes, 0);
  const double fast = StylePlan::seconds(p.prefill, spec);
  spec.host_sync_bytes_per_second /= 4;
  const double slow_sync = StylePlan::seconds(p.prefill, spec);
  EXPECT_GT(slow_sync, fast);
  spec.host_copy_bytes_per_second /= 4;
  const double slow_copy = StylePlan::seconds(p.prefill, spec);
  EXPECT_GT(slow_copy, slow_sync);
  spec.host_call_overhead_seconds *= 4;
  EXPECT_GT(StylePlan::seconds(p.prefill, spec), slow_copy);
  // One dispatch: NPU time without its own overhead + dispatch overhead +
  // syncs + copies and conversions (contiguous streams) + the Python call.
  const npu::DispatchTiming t = npu::estimate_time(q.launches[0].op->design, spec);
  const double want = t.total_seconds - t.overhead_seconds + spec.dispatch_overhead_seconds +
                      q.sync_bytes / spec.host_sync_bytes_per_second +
                      (q.copy_bytes + q.convert_bytes) / spec.host_copy_bytes_per_second +
                      spec.host_call_overhead_seconds;
  EXPECT_NEAR(time_step(q, spec).seconds, want, 1e-12);
  // mlir-air hands numpy arrays straight to its BOs: nothing converted.
  DesignCache air_cache(spec);
  for (const StyleStep& st : plan_published(tiny(), PublishedStyle::mlir_air, 64, 64, air_cache).prefill)
    EXPECT_EQ(st.convert_bytes, 0) << st.name;
}

// IRON's GEMMs are IRON's whole-array design at 64 x 64 x 64 on 8 columns x
// 4 rows (npu::gemm_design), padded as aie_gemm.py pads them (M to 256, N to
// 512), not the linear builder's design; its GEMVs stay with the builder.
TEST(StylePublished, IronGemmsUseIronsWholeArrayDesign) {
  const npu::DeviceSpec spec = npu::DeviceSpec::preset("xdna2");
  DesignCache cache(spec);
  const StylePlan p = plan_published(tiny(), PublishedStyle::iron, 64, 64, cache);
  auto round_up = [](int64_t v, int64_t m) { return (v + m - 1) / m * m; };
  const int64_t M = 256, K = round_up(tiny().hidden_size, 64), N = round_up(tiny().q_dim(), 512);
  npu::GemmParams g{M, K, N, 64, 64, 64, 8, 0};
  const npu::Design want = npu::gemm_design(g, spec);
  const StyleStep& q = p.step("q", false);
  ASSERT_EQ(q.launches.size(), 1u);
  const npu::Design& got = q.launches[0].op->design;
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.launches.size(), want.launches.size());
  const npu::DispatchTiming t = npu::estimate_time(got, spec);
  EXPECT_DOUBLE_EQ(t.total_seconds, npu::estimate_time(want, spec).total_seconds);
  // The built linear op still names the tensors (host side from the graph).
  EXPECT_EQ(q.launches[0].op->shape.dim("M"), 64);
  EXPECT_EQ(p.step("q", true).launches[0].op->design.name.rfind("gemm_", 0), std::string::npos);
}

// mlir-air compiles o_gemv_ffn with omit_pingpong (every core buffer single)
// and keeps ping-pong in rms_gemv_rope and the LM head (backend_presets.py);
// the single buffers cost time.
TEST(StylePublished, MlirAirOmitsPingPongWhereItsBackendDoes) {
  const npu::DeviceSpec spec = npu::DeviceSpec::preset("xdna2");
  DesignCache cache(spec);
  const StylePlan p = plan_published(tiny(), PublishedStyle::mlir_air, 64, 64, cache);
  // The GEMV launches (an add's two inputs share a FIFO: it holds 2, depth 2).
  auto core_depths = [&](const StyleStep& s) {
    std::set<int> d;
    for (const auto& l : s.launches)
      if (l.op->shape.op == "linear")
        for (const auto& launch : l.op->design.launches)
        for (const auto& f : launch.fifos)
            if (spec.kind_of_row(f.producer.row) == npu::TileKind::compute ||
                spec.kind_of_row(f.consumers.at(0).row) == npu::TileKind::compute)
              d.insert(f.depth);
    return d;
  };
  EXPECT_EQ(core_depths(p.step("o_gemv_ffn", true)), std::set<int>{1});
  EXPECT_TRUE(core_depths(p.step("rms_gemv_rope", true)).count(2));
  EXPECT_TRUE(core_depths(p.step("lm_head", true)).count(2));
  // The same GEMV single-buffered is slower than with ping-pong.
  const kernels::BuiltOp& gemv = *p.step("lm_head", true).launches.at(0).op;
  EXPECT_GT(npu::estimate_time(omit_pingpong(gemv, spec)->design, spec).total_seconds,
            npu::estimate_time(gemv.design, spec).total_seconds);
}

TEST(StylePublished, BoundsAreRatiosOfPeaks) {
  npu::DeviceSpec spec = npu::DeviceSpec::preset("xdna2");
  const ModelBounds a = model_bounds(tiny(), 64, spec);
  EXPECT_GT(a.prefill_flops, 0);
  EXPECT_DOUBLE_EQ(a.decode_bound_seconds_per_token, a.decode_weight_bytes / spec.ddr_bytes_per_second);
  spec.clock_hz *= 1.2;
  spec.ddr_bytes_per_second *= 0.5;
  const ModelBounds b = model_bounds(tiny(), 64, spec);
  EXPECT_NEAR(a.prefill_bound_seconds / b.prefill_bound_seconds, 1.2, 1e-12);
  EXPECT_NEAR(b.decode_bound_seconds_per_token / a.decode_bound_seconds_per_token, 2.0, 1e-12);
}

}  // namespace
}  // namespace tessera::compiler
