// Phase 0 (oracle: the source model, the FP32 forward of the gate prompt with
// its taps, the greedy continuation) and phase 1 (every kernel alone, through
// run_phase1), plus oracle.safetensors, where phase 0 keeps what later phases
// compare against.
#include <chrono>
#include <cmath>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "deploy_internal.h"
#include "diagnose_run.h"
#include "tessera/core/error.h"
#include "tessera/model/model_dir.h"
#include "tessera/model/safetensors.h"
#include "tessera/model/synth.h"
#include "tessera/oracle/oracle.h"
#include "tessera/runtime/sampler.h"

namespace tessera::pipeline::detail {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<float> as_floats(const std::vector<int32_t>& ids) { return {ids.begin(), ids.end()}; }

std::vector<int32_t> as_ids(const Tensor& t) {
  std::vector<int32_t> ids;
  for (float f : t.as<float>()) ids.push_back(static_cast<int32_t>(f));
  return ids;
}

// The taps later phases compare: every tap of layer 0 (phase 2), h_out of
// every layer (phase 3), the final norm.
std::map<std::string, std::vector<float>> kept_taps(const oracle::Taps& taps, int64_t layers) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [layer, name] : taps.keys()) {
    if (!(layer == 0 || name == "h_out" || name == "final_norm")) continue;
    if (layer >= layers) continue;
    const std::string key = layer >= 0 ? fmt::format("L{}.{}", layer, name) : name;
    out[key] = taps.get(layer, name).to_f32_vector();
  }
  return out;
}

// Largest minus second-largest logit of a row.
double top2_gap(const std::vector<float>& row) {
  const auto ids = top_ids(row, 2);
  return ids.size() < 2 ? 0.0 : static_cast<double>(row[static_cast<size_t>(ids[0])]) - row[static_cast<size_t>(ids[1])];
}

}  // namespace

void save_oracle(const OracleRun& run, const fs::path& file) {
  std::vector<std::pair<std::string, Tensor>> t;
  auto add = [&](const std::string& name, const std::vector<float>& v) {
    t.emplace_back(name, Tensor::from_f32({static_cast<int64_t>(v.size())}, v));
  };
  add("prompt", as_floats(run.prompt));  // ids < 2^24: exact in f32
  add("continuation", as_floats(run.continuation));
  add("step_logits", run.step_logits);
  for (const auto& [name, v] : run.taps) add("tap/" + name, v);
  model::write_safetensors(file, t, {{"format", "tessera-oracle-run"}, {"version", "1"}});
}

OracleRun load_oracle(const fs::path& file) {
  const model::Weights w = model::load_safetensors(file);
  OracleRun run;
  run.prompt = as_ids(w.get("prompt"));
  run.continuation = as_ids(w.get("continuation"));
  run.step_logits = w.get("step_logits").to_f32_vector();
  for (const std::string& n : w.names())
    if (n.starts_with("tap/")) run.taps[n.substr(4)] = w.get(n).to_f32_vector();
  return run;
}

PhaseResult run_phase0(Context& ctx, std::vector<std::string>& artifacts) {
  const auto t0 = Clock::now();
  PhaseResult r{0, "oracle", "passed", {}, 0, nlohmann::json::object()};
  if (!ctx.opts.preset.empty()) {
    std::optional<int64_t> layers;
    if (ctx.opts.layers > 0) layers = ctx.opts.layers;
    model::write_synthetic_model(model::preset(ctx.opts.preset), ctx.out / "source", ctx.opts.seed, layers);
    for (const char* f : {"source/config.json", "source/model.safetensors", "source/tokenizer.json"})
      artifacts.push_back(f);
  }
  fs::create_directories(ctx.out / "model");
  write_json(ctx.out / "model/config.json", model::config_to_json(ctx.config));
  artifacts.push_back("model/config.json");
  const fs::path tok = ctx.source_dir() / "tokenizer.json";
  if (fs::exists(tok)) {
    // Parsed and checked against the vocabulary here, so that a tokenizer
    // `tessera run` would reject fails the deployment instead.
    model::load_tokenizer(tok, ctx.config);
    fs::copy_file(tok, ctx.out / "model/tokenizer.json", fs::copy_options::overwrite_existing);
    artifacts.push_back("model/tokenizer.json");
  } else {
    fs::remove(ctx.out / "model/tokenizer.json");
    ctx.issues.push_back(fmt::format("{} has no tokenizer.json: tessera run cannot use this deployment",
                                     ctx.source_dir().string()));
  }

  // The chat template's source: recorded, so that run/chat/serve notice a
  // changed template like any other changed artifact.
  const fs::path tc = ctx.source_dir() / "tokenizer_config.json";
  if (fs::exists(tc)) {
    fs::copy_file(tc, ctx.out / "model/tokenizer_config.json", fs::copy_options::overwrite_existing);
    artifacts.push_back("model/tokenizer_config.json");
  } else {
    fs::remove(ctx.out / "model/tokenizer_config.json");
  }

  OracleRun run;
  run.prompt = ctx.opts.prompt.empty() ? gate_prompt(ctx.opts.seed, ctx.opts.gate_seq, ctx.config.vocab_size)
                                       : ctx.opts.prompt;
  const oracle::Oracle orc(ctx.config, ctx.weights());
  oracle::KvCache cache = orc.new_cache();
  const oracle::TapSet all = oracle::TapSet::all();
  oracle::Taps taps;
  Tensor logits = orc.forward(run.prompt, cache, {oracle::LogitsMode::last, &all, &taps});
  run.taps = kept_taps(taps, ctx.config.num_layers);
  nlohmann::json gaps = nlohmann::json::array();
  const auto n = static_cast<size_t>(ctx.opts.continuation);
  for (size_t i = 0; i < n; ++i) {
    const std::vector<float> row = logits.to_f32_vector();
    run.step_logits.insert(run.step_logits.end(), row.begin(), row.end());
    const int32_t next = runtime::argmax(row);
    run.continuation.push_back(next);
    gaps.push_back(top2_gap(row));
    ctx.progress("phase 0: oracle greedy", i + 1, n);
    if (i + 1 < n) logits = orc.forward(std::span(&next, 1), cache);
  }
  save_oracle(run, ctx.out / "oracle.safetensors");
  artifacts.push_back("oracle.safetensors");
  r.details = {{"model", ctx.config.name},
               {"layers", ctx.config.num_layers},
               {"source", ctx.source_dir().string()},
               {"prompt", run.prompt},
               {"continuation", run.continuation},
               {"top2_gaps", gaps},
               {"taps_kept", run.taps.size()}};
  ctx.set_oracle(std::move(run));
  r.host_seconds = since(t0);
  return r;
}

PhaseResult run_phase1_gate(Context& ctx, std::vector<std::string>&) {
  const auto t0 = Clock::now();
  Phase1Options po;
  po.seq = ctx.seq();
  po.seed = ctx.opts.seed;
  po.prompt = ctx.oracle().prompt;  // the gate prompt phases 2-6 run
  po.builders = ctx.opts.builders;
  std::vector<Diagnosis> diagnoses;
  po.on_failure = phase1_diagnoser(ctx, diagnoses);
  ctx.progress("phase 1: kernels", 0, 1);
  const Phase1Report rep = run_phase1(ctx.config, ctx.weights(), ctx.opts.spec, po);
  ctx.progress("phase 1: kernels", 1, 1);
  PhaseResult r{1, "kernels", rep.passed() ? "passed" : "failed", {}, 0, rep.to_json()};
  for (const KernelResult& k : rep.results) {
    GateCheck c;
    c.name = fmt::format("{} {} [{}]", k.phase, k.node, k.shape);
    c.metrics = k.metrics;
    c.threshold = k.threshold;
    c.passed = k.status == KernelStatus::pass;
    if (!c.passed)
      c.message = k.status == KernelStatus::fail ? metric_failures(k.metrics, k.threshold)
                                                 : fmt::format("{}: {}", status_name(k.status), k.message);
    r.checks.push_back(std::move(c));
  }
  attach_phase1(ctx, r, rep, diagnoses);
  r.host_seconds = since(t0);
  return r;
}

}  // namespace tessera::pipeline::detail
