#pragma once
// A Session runs a deployed model on the modelled NPU: it owns the packed
// weights (device DDR), the KV cache and a DesignCache, runs prefill for a
// prompt of any length, then decode token by token, sampling on the host.
//
// Bucket policy (explicit, BucketPolicy): prefill shapes are compiled per
// bucket, not per prompt and not one fixed 2048: `exact` builds the prompt's
// own length; `pow2` pads the prompt to the next power of two >= 16 (capped
// by the context) with token 0 after the real tokens. Padding is exact for the
// real rows: attention is causal, so real rows never see pad rows; the pad
// rows' K/V land in cache positions >= the prompt length, which the next
// decode step overwrites before any attention reads them, and the logits are
// taken at the last real row. Decode compiles attention / kv_append per
// context length (only those two designs change between positions; every
// other design comes from the DesignCache): the decode plan's passes run once
// per power-of-two bucket of cache lengths, and each position retargets that
// plan (compiler/retarget.h), keeping the bucket's pass decisions.
//
// Timing: every call reports predicted NPU time (timing model + host model,
// what the device would take) and host wall time (this machine simulating
// it), separately - never one passed off as the other.
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/compiler/packed_weights.h"
#include "tessera/core/error.h"
#include "tessera/compiler/plan.h"
#include "tessera/model/config.h"
#include "tessera/npu/device_spec.h"
#include "tessera/runtime/executor.h"
#include "tessera/runtime/sampler.h"

namespace tessera::runtime {

enum class BucketPolicy { exact, pow2 };
BucketPolicy parse_bucket_policy(std::string_view name);  // "exact" | "pow2"
const char* bucket_policy_name(BucketPolicy p);
// The compiled prefill length for a prompt of n tokens under `policy`, when
// `context` positions are free in the KV cache (UsageError if n does not fit).
int64_t bucket_length(BucketPolicy policy, int64_t n, int64_t context);

struct SessionOptions {
  compiler::PlanStyle style = compiler::PlanStyle::standard;
  int64_t context = 0;  // KV capacity in positions; 0: config max capped at 4096
  BucketPolicy bucket = BucketPolicy::exact;
  compiler::HostModel host;
  // Pass pipelines (compiler/passes.h) for prefill (S > 1) and decode (S = 1)
  // plans; empty: the style's.
  std::vector<std::string> prefill_passes, decode_passes;
  // Values to keep from each call (ExecResult::values) for the gates; empty:
  // only the logits.
  std::set<std::string> keep;
  // tune-tiles decisions to start from (a deployment's, tile_choices.h);
  // null: the session's DesignCache keeps its own.
  std::shared_ptr<compiler::TileChoices> tile_choices;
  // Keep the decode plan's packed weights resident (PackedWeights::
  // keep_resident) when they total at most this many bytes; 0: never. For a
  // process that holds nothing else as large (run, chat, serve).
  int64_t resident_decode_bytes = 0;
  // Keep every call's per-step records (CallTiming::steps): `tessera run
  // --profile`'s per-op breakdown of the host time.
  bool profile = false;
};

struct CallTiming {
  int64_t tokens = 0;             // real tokens processed (prompt length or 1)
  int64_t compiled_tokens = 0;    // bucket length actually run
  double predicted_seconds = 0;   // NPU + host model
  double host_seconds = 0;        // wall time on this machine
  double plan_host_seconds = 0;   // of which lowering (or, decoding, retargeting) the plan
  std::vector<StepRecord> steps;  // the executor's, when SessionOptions::profile
};

enum class StopReason { eos, max_tokens, context_full, callback };
const char* stop_reason_name(StopReason r);

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  SamplingOptions sampling;               // temperature 0 = greedy
  std::vector<int32_t> stop_tokens;       // empty: config eos ids
  // Called with each new token as soon as it is sampled; return false to stop.
  std::function<bool(int32_t token)> on_token;
};

struct GenerateResult {
  std::vector<int32_t> tokens;            // new tokens only
  StopReason stop = StopReason::max_tokens;
  std::string stop_message;               // e.g. "context full: 4096 positions"
  CallTiming prefill;
  std::vector<CallTiming> decode;         // one per decode call
  double decode_predicted_seconds_per_token() const;
  double decode_host_seconds_per_token() const;
};

class Session {
 public:
  // Throws InputError when `weights` lack a layout the plans need (names it).
  Session(const model::ModelConfig& config, std::shared_ptr<compiler::PackedWeights> weights,
          const npu::DeviceSpec& spec, SessionOptions opts = {});
  // Not movable: a prompt leaves a lowering running on another thread that
  // holds this session's address (start_next_decode).
  Session(Session&&) = delete;
  Session& operator=(Session&&) = delete;

  // Runs the prompt at positions position() .. +n-1; returns the logits of its
  // last token ([vocab] FP32 of bf16 values). Throws ContextFullError (a
  // LimitError) when the cache cannot hold it, UsageError for an empty prompt,
  // InputError for an id outside the vocabulary.
  std::vector<float> prefill(std::span<const int32_t> tokens);
  // One token at position(); returns its logits.
  std::vector<float> decode(int32_t token);
  // prefill(prompt) then sample / decode until a stop condition.
  GenerateResult generate(std::span<const int32_t> prompt, const GenerateOptions& opts);

  int64_t position() const { return position_; }
  int64_t context() const { return context_; }
  void reset();  // empties the KV cache
  const CallTiming& last_timing() const { return last_timing_; }
  // Values kept from the last call (SessionOptions::keep), named as in executor.h.
  const Values& last_values() const { return last_values_; }
  // Plan of the last call (for reports).
  // UsageError before the first call has completed.
  const compiler::Plan& last_plan() const;

 private:
  // Runs `tokens` (the first `real` of them real, the rest bucket padding) at
  // position_; copies the real rows' K/V into the cache and advances by `real`.
  std::vector<float> forward(std::span<const int32_t> tokens, int64_t real);
  Values forward_inputs(std::span<const int32_t> tokens);  // lends the KV cache vectors
  void give_back_caches(Values& inputs);  // takes them back, sized to position_ rows
  compiler::Plan lower_plan(int64_t seq, int64_t past);
  // One token at `past`: the bucket's plan, retargeted in place (valid until
  // the next call).
  const compiler::Plan& decode_plan(int64_t past);
  void check_tokens(std::span<const int32_t> tokens) const;
  void check_room(int64_t n, const char* what) const;  // ContextFullError

  model::ModelConfig config_;
  std::shared_ptr<compiler::PackedWeights> weights_;
  npu::DeviceSpec spec_;
  SessionOptions opts_;
  int64_t context_ = 0;
  int64_t position_ = 0;
  bool stuck_once_ = false;  // the session_stuck_pos mutant fired (core/mutants.h)
  std::unique_ptr<compiler::DesignCache> cache_;
  std::unique_ptr<Executor> exec_;
  // Per layer, K and V of positions 0..position_-1: [position_, kv_dim] FP32 of
  // bf16 values (grown per call up to [context, kv_dim], not allocated up front).
  std::vector<std::vector<float>> k_cache_, v_cache_;
  CallTiming last_timing_;
  Values last_values_;
  // The plan of the last call: a prefill's own, or decode_plan_ itself.
  std::shared_ptr<const compiler::Plan> last_plan_;
  // The decode plan lowered at the first position of the current bucket of
  // cache lengths and retargeted in place to each later one (decode_plan),
  // and that bucket.
  std::shared_ptr<compiler::Plan> decode_plan_;
  int decode_bucket_ = -1;
  // The decode plan for the position after a prompt, lowered on a thread of
  // its own while the prompt runs (start_next_decode), and that position.
  // Last: destroyed (joined) before the members its lowering reads.
  std::future<compiler::Plan> next_decode_;
  int64_t next_decode_past_ = -1;
  void start_next_decode(int64_t past);
  std::optional<compiler::Plan> take_next_decode(int64_t past);
};

// Thrown when a prompt or a decode step would not fit in the KV cache.
struct ContextFullError : LimitError {
  using LimitError::LimitError;
};

}  // namespace tessera::runtime
