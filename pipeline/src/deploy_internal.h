#pragma once
// Shared by the deploy phases (deploy*.cpp, phase2/3/6.cpp): the deployment
// context with its lazily obtained inputs (model weights, oracle results,
// plans, packed weights), so a resumed run loads only what the phases it
// redoes need.
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/compiler/packed_weights.h"
#include "tessera/compiler/plan.h"
#include "tessera/model/config.h"
#include "tessera/model/weights.h"
#include "tessera/pipeline/deploy.h"
#include "tessera/pipeline/local_gate.h"
#include "tessera/pipeline/manifest.h"
#include "tessera/runtime/executor.h"

namespace tessera::pipeline::detail {

namespace fs = std::filesystem;

// What phase 0 recorded from the FP32 oracle (saved as oracle.safetensors).
struct OracleRun {
  std::vector<int32_t> prompt;        // the gate prompt
  std::vector<int32_t> continuation;  // the oracle's greedy tokens after it
  // Prefill taps by ValueRef name: every tap of layer 0, h_out of every layer.
  std::map<std::string, std::vector<float>> taps;
  // Row i: the oracle's logits from which continuation[i] was picked (row 0:
  // the last prompt position). [continuation, vocab].
  std::vector<float> step_logits;
  std::vector<float> step_row(size_t i, int64_t vocab) const;
};

class Context {
 public:
  Context(const DeployOptions& opts, Manifest& manifest);

  const DeployOptions& opts;
  Manifest& manifest;
  fs::path out;
  model::ModelConfig config;  // after the layer override
  std::vector<std::string> issues;  // this run's notes for issues.md
  std::exception_ptr failure;       // the error a phase ended in (rethrown once reported)

  fs::path source_dir() const;     // the HF directory the weights come from
  const model::Weights& weights(); // source weights, truncated to config's layers
  OracleRun& oracle();             // phase 0's result (loaded from oracle.safetensors if skipped)
  void set_oracle(OracleRun run);
  compiler::DesignCache& cache();
  const compiler::Plan& prefill_plan();  // S = prompt length, P = 0
  const compiler::Plan& decode_plan();   // S = 1, P = prompt length
  // The pass pipelines the plans are lowered with: before phases 4 / 5 the
  // required passes only; phases 4 / 5 add the style's optimization passes
  // one at a time (deploy_optimize.cpp). Setting one drops the cached plan.
  compiler::PlanOptions plan_options(bool decode) const;
  void set_passes(bool decode, std::vector<std::string> passes);
  const std::vector<std::string>& passes(bool decode) const { return decode ? decode_passes_ : prefill_passes_; }
  // The packed weights phases 2/3/6 run on: loaded from weights.safetensors
  // only when phase 2 (which packs them) is passed and current (it was
  // skipped), else packed from the source and written. The test hook
  // opts.tamper_packed is applied to this in-memory copy.
  std::shared_ptr<compiler::PackedWeights> packed();
  // The prefill and decode plans with the required passes and tune-tiles
  // (none when the style does not tune): packed beside the plain ones.
  std::vector<compiler::Plan> tuned_plans();
  // Gives the mapped pages of the source and packed weights back (each phase
  // reads them anew from the page cache): peak RSS holds one phase's working
  // set, not every phase's.
  void release_pages() const;
  int64_t seq() const;  // gate prompt length

  // sha256 of what a phase reads: options, source files and every artifact of
  // the phases before it (manifest.h: the verdict chain).
  std::map<std::string, std::string> inputs_of(int phase);
  // Artifacts of `phase` that can be re-derived from the source and options
  // (model/config.json, model/tokenizer.json, spec.json) but differ from that
  // derivation: one line each. These are caught however manifest.json reads.
  std::vector<std::string> underived(int phase);
  // sha256 of out/rel, memoized until forget_hashes() (called whenever a phase
  // is about to write, and after it wrote).
  const FileHasher& hasher() const { return hasher_; }
  void forget_hashes();
  void progress(const std::string& label, size_t done, size_t total) const;

 private:
  std::string options_hash() const;
  std::string source_hash();

  std::optional<model::Weights> weights_;
  std::optional<OracleRun> oracle_;
  std::unique_ptr<compiler::DesignCache> cache_;
  std::unique_ptr<compiler::Plan> prefill_, decode_;
  std::shared_ptr<compiler::PackedWeights> packed_;
  std::optional<std::string> source_hash_;
  std::vector<std::string> prefill_passes_, decode_passes_;
  std::map<std::string, std::string> sha_memo_;
  FileHasher hasher_;
};

// The host values a plan at P = 0 reads: token ids, the RoPE table of
// positions 0..S-1, and empty K/V caches of S rows per layer (executor.h).
runtime::Values host_inputs(const model::ModelConfig& c, const std::vector<int32_t>& tokens);
// The NPU value `name` from an executor result; InternalError naming it when absent.
const std::vector<float>& npu_value(const runtime::ExecResult& r, const std::string& name);

// Local gates (local_gate.h) of every node of `g` that `npu` (an executor
// result of a P = 0 call on `tokens`) holds, appended to r.checks as
// prefix + value ("local L0.q_rot"); returns how many. The reference takes
// the source weights and host_inputs(ctx.config, tokens).
int64_t add_local_checks(Context& ctx, const compiler::Graph& g, const runtime::Values& npu,
                      const std::vector<int32_t>& tokens, const std::string& prefix, PhaseResult& r,
                      int64_t last_row = -1);

// The local gates of every node of `g` that `npu` holds, the reference taking
// the source weights (through `store` when given, local_gate.h WeightStore)
// and the host values `host` an honest caller supplies for this call.
std::vector<LocalCheck> local_checks_on(Context& ctx, const compiler::Graph& g, const runtime::Values& npu,
                                        const runtime::Values& host, int64_t last_row, WeightStore* store);

// Deterministic prompt ids spread over the vocabulary (splitmix64).
std::vector<int32_t> gate_prompt(uint64_t seed, int64_t n, int64_t vocab);

// Phases. Each returns its result; artifacts beyond phase<N>.json are written
// by the phase and listed in `artifacts` (relative to ctx.out).
PhaseResult run_phase0(Context& ctx, std::vector<std::string>& artifacts);
PhaseResult run_phase1_gate(Context& ctx, std::vector<std::string>& artifacts);
PhaseResult run_phase2(Context& ctx, std::vector<std::string>& artifacts);
PhaseResult run_phase3(Context& ctx, std::vector<std::string>& artifacts);
// Phase 2's gates without its artifacts (phase 4 re-gates every pass with it).
PhaseResult gate_block(Context& ctx);
PhaseResult run_phase4(Context& ctx, std::vector<std::string>& artifacts);
PhaseResult run_phase5(Context& ctx, std::vector<std::string>& artifacts);
PhaseResult run_phase6(Context& ctx, std::vector<std::string>& artifacts);
// Phase 7: the independent evaluator (evaluate.h); writes evaluation.json / .md.
PhaseResult run_phase7(Context& ctx, std::vector<std::string>& artifacts);
// The pass lists phases 4 / 5 kept (from phase4.json / phase5.json when they
// ran), for phase 6 and a resumed run.
void load_optimized_passes(Context& ctx, int upto);

// Oracle data persistence (deploy_oracle.cpp).
void save_oracle(const OracleRun& run, const fs::path& file);
OracleRun load_oracle(const fs::path& file);

// Report helpers (deploy_report.cpp).
nlohmann::json phase_to_json(const PhaseResult& r);
PhaseResult phase_from_json(const nlohmann::json& j);
// "max_rel 1.2e-01 > 3.1e-02, cosine 0.91 < 0.996" (empty when nothing fails).
std::string metric_failures(const Metrics& m, const Threshold& t);
GateCheck make_check(std::string name, const Metrics& m, const Threshold& t);
void write_text(const fs::path& file, const std::string& text);
void write_json(const fs::path& file, const nlohmann::json& j);
std::string plan_markdown(const compiler::Plan& prefill, const compiler::Plan& decode);
std::string issues_markdown(const std::string& previous, const DeployReport& rep,
                            const std::vector<std::string>& notes);

// Top-k ids of a logits row, best first (ties: lower id).
std::vector<int32_t> top_ids(const std::vector<float>& row, size_t k);

}  // namespace tessera::pipeline::detail
