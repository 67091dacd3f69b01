#pragma once
// Plan styles that mirror the two published systems at the timing level
// (../shared/reference/published-llama-3.2-1b.md and mlir-air-structure.md),
// for any model: the yardsticks tessera's own plans are compared with.
//
//   iron      AMD's hand-written baseline: one dispatch per operator, every
//             operator on the NPU, activations round-trip through host DDR (a
//             buffer-object sync of every dispatch's activation inputs and
//             outputs); SwiGLU (gate, up, silu_mul, down) is one dispatch of
//             four launches (IRON's runlist). GEMMs in IRON's Llama tiles
//             (64 x 64 x 64 on 8 columns), the rest the builders' defaults.
//             Host side of every call as amd/IRON's operator base runs it
//             (applications/llama_3.2_1b/src/operator/aie_base.py): one Python
//             operator call, the activation inputs copied into their BOs and
//             the outputs copied out, and run_runlist's syncs of *every* BO of
//             the runlist (weights, activations, runlist intermediates) to the
//             device before and from the device after the run; and its
//             torch <-> numpy conversions (utils.py torch_to_numpy /
//             numpy_to_torch: bf16 -> fp32 -> bf16, two passes over every
//             activation input and output) at host_copy_bytes_per_second. Its
//             GEMMs are timed with IRON's own whole-array design
//             (npu::gemm_design), padded as aie_gemm.py pads them.
//   mlir-air  the paper's system (June 2026 structure): the prompt padded to
//             2048 rows; per layer an attention-input dispatch (RMSNorm, Q/K/V
//             GEMMs, biases / QK-norm when the model has them, RoPE), the
//             FlashAttention dispatch, and O + residual + RMSNorm + SwiGLU +
//             residual (split into three dispatches when the FFN exceeds 8192,
//             instead of padding: the structure file lets a style choose);
//             K/V copied out to a host cache per layer; decode attention, KV
//             append and all M = 1 glue (final RMSNorm, argmax, embedding) on
//             the host CPU; the LM head on the last token as one GEMV dispatch
//             in 8 partitions. Hidden / FFN sizes that are not multiples of
//             1024 are padded (the April deployments' rule); head_dim != 64
//             adds host seq <-> head transposes around FlashAttention. Tiles
//             follow the published registry configurations where the builders
//             can express them (StylePlan::notes says where they cannot).
//
// A fused dispatch costs one dispatch overhead + the sum of its launches
// (each built op's time without its own dispatch overhead) + reconfiguration
// per extra launch + its host side: copies into / out of buffer objects at
// host_copy_bytes_per_second, syncs at host_sync_bytes_per_second (cache
// maintenance over the BO's bytes) and host_call_overhead_seconds per
// host-language call. mlir-air writes each dispatch's activation inputs
// (copy + to-device sync) and reads outputs through zero-copy views.
// Host steps run at the DeviceSpec's host CPU figures.
//
// These are timing-level plans (no packed weights, no functional run); a later
// session expresses them as pass pipelines on the plan IR.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tessera/compiler/plan.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/model/config.h"
#include "tessera/npu/device_spec.h"
#include "tessera/npu/timing.h"

namespace tessera::compiler {

enum class PublishedStyle { iron, mlir_air };
bool is_published_style(std::string_view name);      // "iron" | "mlir-air"
PublishedStyle parse_published_style(std::string_view name);
const char* published_style_name(PublishedStyle s);

struct StyleLaunch {
  std::string name;  // the graph node ("q", "gate", ...) or "lm_head[3]"
  std::shared_ptr<const kernels::BuiltOp> op;
};

// One dispatch (npu) or one host operation, `repeat` times (once per layer).
struct StyleStep {
  std::string name;
  bool npu = true;
  int64_t repeat = 1;
  std::vector<StyleLaunch> launches;  // npu
  // npu, the host side of one runtime call (DeviceSpec host figures):
  int64_t sync_bytes = 0;   // bytes covered by buffer-object syncs (each direction counted)
  int64_t copy_bytes = 0;   // bytes the host copies into / out of mapped BOs
  int64_t host_calls = 0;   // host-language operator calls wrapped around the dispatch
  int64_t convert_bytes = 0;  // host bytes touched converting activations between frameworks
  int64_t host_bytes = 0;             // host: bytes read + written
  double host_flops = 0;              // host: fp32 operations
};

// estimate_time memoized per design for one spec: the calibration re-times
// the same designs, shared by many figures, under each trial spec.
class TimingMemo {
 public:
  explicit TimingMemo(const npu::DeviceSpec& spec) : spec_(spec) {}
  const npu::DispatchTiming& get(const npu::Design& d);
  const npu::DeviceSpec& spec() const { return spec_; }

 private:
  const npu::DeviceSpec& spec_;
  std::map<const npu::Design*, npu::DispatchTiming> memo_;
};

struct StepTime {
  double seconds = 0;  // one instance
  std::string bound;   // overhead | compute | vector | stream | dma | ddr | host
};
// Under any spec with the same structural fields as the one the ops were built
// for (the calibration re-times the same designs).
StepTime time_step(const StyleStep& step, const npu::DeviceSpec& spec);
StepTime time_step(const StyleStep& step, TimingMemo& memo);

// The model's physical lower bounds on a spec: prefill FLOPs over the array's
// peak, decode weight bytes over the NPU's DDR share.
struct ModelBounds {
  double prefill_flops = 0, decode_weight_bytes = 0;
  double prefill_bound_seconds = 0, decode_bound_seconds_per_token = 0;
};
ModelBounds model_bounds(const model::ModelConfig& c, int64_t seq, const npu::DeviceSpec& spec);

struct StylePlan {
  std::string model;
  PublishedStyle style = PublishedStyle::iron;
  int64_t prompt = 0, seq = 0, decode_at = 0;  // seq: rows prefill runs (padded)
  int64_t hidden = 0, intermediate = 0;        // after padding
  std::vector<StyleStep> prefill, decode;
  std::vector<std::string> notes;               // where the builders differ from the source

  static double seconds(const std::vector<StyleStep>& steps, const npu::DeviceSpec& spec);
  static double seconds(const std::vector<StyleStep>& steps, TimingMemo& memo);
  int64_t dispatches_per_layer(const std::vector<StyleStep>& steps) const;
  const StyleStep& step(const std::string& name, bool decode) const;  // throws naming it
  std::string dump(const npu::DeviceSpec& spec) const;
  nlohmann::json to_json(const npu::DeviceSpec& spec) const;
};

// The op as aircc builds it with omit_pingpong: no spare buffer on a core (a
// FIFO's depth = the objects its core holds at once), so refills no longer
// overlap the core's compute (the timing model's single-buffer stall).
// mlir-air's registry GEMVs and FlashAttention and its o_gemv_ffn dispatch are
// compiled so; its other kernels keep ping-pong (the builders' depth 2).
// Validated against `spec`; throws LimitError when the design needs depth 2.
std::shared_ptr<const kernels::BuiltOp> omit_pingpong(const kernels::BuiltOp& op,
                                                      const npu::DeviceSpec& spec);

// Builds every launch through `cache` (its spec); throws LimitError /
// UsageError from builders that cannot build even with their default tiles.
StylePlan plan_published(const model::ModelConfig& config, PublishedStyle style, int64_t seq,
                         int64_t decode_at, DesignCache& cache);

}  // namespace tessera::compiler
