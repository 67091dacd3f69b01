// tessera plan: the compiled dispatch plan of a model (compiler/plan.h) for a
// prefill of --seq tokens and one decode step after it, with every step's
// predicted time and bound and the totals; no weights needed (a preset or a
// config.json is enough).
#include <algorithm>
#include <memory>
#include <set>

#include <fmt/ranges.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "tessera/compiler/passes.h"
#include "tessera/compiler/tile_choices.h"
#include "tessera/compiler/plan.h"
#include "tessera/compiler/style_published.h"
#include "tessera/core/error.h"
#include "tessera/model/config.h"
#include "tessera/npu/device_spec.h"

namespace {

using namespace tessera;

struct PlanArgs {
  std::string model_dir;
  std::string preset;
  std::string style = "default";
  int64_t seq = 2048;
  int64_t context = 0;
  int64_t decode_at = -1;
  std::string spec = "xdna2";
  bool json = false;
  std::string passes;                 // "a,b,c": the pipeline (empty: the style's)
  std::vector<std::string> disabled;  // --disable-pass NAME (repeatable)
  std::string print_after;            // pass whose output IR is printed
};

// One pass's records on the prefill and the decode plan.
struct PassRow {
  compiler::PassRecord prefill, decode;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t a = 0;
  while (a <= s.size()) {
    const size_t b = std::min(s.find(',', a), s.size());
    if (b > a) out.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

std::string pass_line(const PassRow& r) {
  return fmt::format("pass {:<14} prefill {} | decode {} | {} | moved: prefill {}, decode {}",
                     r.prefill.pass,
                     fmt::format("{:.4g} -> {:.4g} ms", r.prefill.before * 1e3, r.prefill.after * 1e3),
                     fmt::format("{:.4g} -> {:.4g} ms", r.decode.before * 1e3, r.decode.after * 1e3),
                     r.prefill.changed == r.decode.changed
                         ? r.prefill.changed
                         : fmt::format("prefill: {}; decode: {}", r.prefill.changed, r.decode.changed),
                     r.prefill.moved, r.decode.moved);
}

nlohmann::json pass_json(const PassRow& r) {
  return {{"pass", r.prefill.pass},
          {"prefill_seconds_before", r.prefill.before},
          {"prefill_seconds_after", r.prefill.after},
          {"decode_seconds_before", r.decode.before},
          {"decode_seconds_after", r.decode.after},
          {"prefill_changed", r.prefill.changed},
          {"decode_changed", r.decode.changed},
          {"prefill_moved", r.prefill.moved},
          {"decode_moved", r.decode.moved}};
}

nlohmann::json step_list(const compiler::Plan& p, const char* phase, compiler::StepKind kind) {
  nlohmann::json out = nlohmann::json::array();
  for (const compiler::Step& s : p.steps)
    if (s.kind == kind)
      out.push_back({{"name", s.name()},
                     {"op", s.front().shape.op},
                     {"launches", s.launches.size()},
                     {"shape", compiler::shape_text(s.front().shape)},
                     {"phase", phase},
                     {"seconds", s.seconds()},
                     // seconds includes it; bound names the dispatch's own term
                     {"relayout_seconds", s.relayout_seconds},
                     {"bound", s.bound()}});
  return out;
}

nlohmann::json summary_json(const PlanArgs& a, const compiler::Plan& pre,
                            const compiler::Plan& dec, const std::vector<PassRow>& rows) {
  nlohmann::json j = {{"preset", pre.model},
                      {"style", compiler::plan_style_name(pre.style)},
                      {"spec", pre.spec},
                      {"seq", pre.seq},
                      {"decode_at", dec.past},
                      {"context", pre.context},
                      {"prefill_seconds", pre.predicted_seconds()},
                      {"prefill_tokens_per_second", pre.seq / pre.predicted_seconds()},
                      {"decode_seconds_per_token", dec.predicted_seconds()},
                      {"decode_tokens_per_second", 1.0 / dec.predicted_seconds()},
                      {"dispatches_prefill", pre.dispatches()},
                      {"dispatches_decode", dec.dispatches()},
                      {"dispatches_per_layer_prefill", pre.dispatches_per_layer()},
                      {"dispatches_per_layer_decode", dec.dispatches_per_layer()},
                      {"passes", pre.passes},
                      {"arena_bytes_prefill", pre.arena_bytes()},
                      {"arena_bytes_decode", dec.arena_bytes()}};
  nlohmann::json pj = nlohmann::json::array();
  for (const PassRow& r : rows) pj.push_back(pass_json(r));
  j["pass_stats"] = std::move(pj);
  if (!a.model_dir.empty()) j["model_dir"] = a.model_dir;
  nlohmann::json d = step_list(pre, "prefill", compiler::StepKind::npu);
  for (auto& s : step_list(dec, "decode", compiler::StepKind::npu)) d.push_back(std::move(s));
  nlohmann::json h = step_list(pre, "prefill", compiler::StepKind::host);
  for (auto& s : step_list(dec, "decode", compiler::StepKind::host)) h.push_back(std::move(s));
  j["dispatches"] = std::move(d);
  j["host_steps"] = std::move(h);
  return j;
}

// Kernels the plan calls that no calibration figure exercised on this spec.
std::vector<std::string> unconstrained(const std::vector<const npu::Design*>& designs,
                                       const npu::DeviceSpec& spec) {
  std::set<std::string> used;
  for (const npu::Design* d : designs)
    for (auto& k : npu::called_kernels(*d)) used.insert(k);
  std::vector<std::string> out;
  for (const auto& k : used)
    if (std::find(spec.constrained_kernels.begin(), spec.constrained_kernels.end(), k) ==
        spec.constrained_kernels.end())
      out.push_back(k);
  return out;
}

// Spec, calibration, bounds and the prediction's distance to them.
void add_context(nlohmann::json& j, const npu::DeviceSpec& spec, const compiler::ModelBounds& b,
                 const std::vector<std::string>& free_kernels) {
  j["spec"] = spec.name;
  j["calibration"] = spec.calibration;
  j["prefill_bound_seconds"] = b.prefill_bound_seconds;
  j["prefill_flops"] = b.prefill_flops;
  j["decode_bound_seconds_per_token"] = b.decode_bound_seconds_per_token;
  j["decode_weight_bytes"] = b.decode_weight_bytes;
  j["unconstrained_kernels"] = free_kernels;
}

void print_context(const npu::DeviceSpec& spec, const compiler::ModelBounds& b, double prefill,
                   double decode, const std::vector<std::string>& free_kernels) {
  fmt::print("  spec {} (calibration: {})\n", spec.name, spec.calibration);
  fmt::print("  physical bounds: prefill {:.4g} ms (FLOPs / peak MAC rate, {:.3g}x above it), "
             "decode {:.4g} ms per token (weight bytes / DDR, {:.3g}x above it)\n",
             b.prefill_bound_seconds * 1e3, prefill / b.prefill_bound_seconds,
             b.decode_bound_seconds_per_token * 1e3, decode / b.decode_bound_seconds_per_token);
  if (!free_kernels.empty()) {
    std::string names;
    for (const auto& k : free_kernels) names += (names.empty() ? "" : ", ") + k;
    fmt::print("  unconstrained kernels (no calibration figure exercises them): {}\n", names);
  }
}

int run_published(const PlanArgs& a, const model::ModelConfig& config, compiler::DesignCache& cache) {
  const auto style = compiler::parse_published_style(a.style);
  const npu::DeviceSpec& spec = cache.spec();
  const int64_t ctx = a.context > 0 ? a.context : config.default_context();
  const int64_t at = a.decode_at >= 0 ? a.decode_at : std::min(std::max<int64_t>(a.seq, 2048), ctx - 1);
  const compiler::StylePlan p = compiler::plan_published(config, style, a.seq, at, cache);
  const double pre = compiler::StylePlan::seconds(p.prefill, spec);
  const double dec = compiler::StylePlan::seconds(p.decode, spec);
  const compiler::ModelBounds b = compiler::model_bounds(config, a.seq, spec);
  std::vector<const npu::Design*> designs;
  for (const auto* steps : {&p.prefill, &p.decode})
    for (const auto& st : *steps)
      for (const auto& l : st.launches) designs.push_back(&l.op->design);
  const auto free_kernels = unconstrained(designs, spec);
  if (a.json) {
    nlohmann::json j = {{"preset", p.model},
                        {"style", a.style},
                        {"seq", a.seq},
                        {"padded_seq", p.seq},
                        {"decode_at", p.decode_at},
                        {"prefill_seconds", pre},
                        {"prefill_tokens_per_second", a.seq / pre},
                        {"decode_seconds_per_token", dec},
                        {"decode_tokens_per_second", 1.0 / dec},
                        {"dispatches_per_layer_prefill", p.dispatches_per_layer(p.prefill)},
                        {"dispatches_per_layer_decode", p.dispatches_per_layer(p.decode)},
                        {"plan", p.to_json(spec)}};
    add_context(j, spec, b, free_kernels);
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("{}", p.dump(spec));
  fmt::print("summary {} style={} spec={}\n", p.model, a.style, spec.name);
  fmt::print("  prefill S={} (run as {} rows): {:.4g} ms, {} dispatches per layer\n", a.seq, p.seq,
             pre * 1e3, p.dispatches_per_layer(p.prefill));
  fmt::print("  decode P={}: {:.4g} ms per token ({:.4g} tok/s), {} dispatches per layer\n",
             p.decode_at, dec * 1e3, 1.0 / dec, p.dispatches_per_layer(p.decode));
  print_context(spec, b, pre, dec, free_kernels);
  return 0;
}

// Runs the pipeline on one plan, recording each pass and keeping the IR
// after `print_after`.
void run_pipeline(compiler::Plan& p, const std::vector<std::string>& names,
                  compiler::DesignCache& cache, const std::string& print_after,
                  std::vector<compiler::PassRecord>& records, std::string& ir) {
  compiler::run_passes(p, names, cache, [&](const compiler::PassRecord& r, const compiler::Plan& now) {
    records.push_back(r);
    if (r.pass == print_after) ir = now.dump();
  });
}

int run_plan(const PlanArgs& a) {
  if (a.model_dir.empty() == a.preset.empty())
    throw_error<UsageError>("plan: give exactly one of -m DIR or --preset NAME");
  const model::ModelConfig config = a.preset.empty()
                                        ? model::load_config(a.model_dir + "/config.json")
                                        : model::preset(a.preset);
  const npu::DeviceSpec spec = tessera::cli::spec_from_arg(a.spec);
  compiler::DesignCache cache(spec);
  if (compiler::is_published_style(a.style)) return run_published(a, config, cache);
  const compiler::PlanStyle style = compiler::parse_plan_style(a.style);
  compiler::PlanOptions opts;
  opts.style = style;
  opts.context = a.context;
  opts.passes = split_commas(a.passes);
  opts.disabled = std::set<std::string>(a.disabled.begin(), a.disabled.end());
  const std::vector<std::string> names = compiler::resolve_passes(style, opts.passes, opts.disabled);
  if (!a.print_after.empty() && std::find(names.begin(), names.end(), a.print_after) == names.end())
    throw_error<UsageError>("plan: --print-after {}: not in the pipeline {}", a.print_after,
                            fmt::join(names, ","));
  if (!a.print_after.empty() && a.json)
    throw_error<UsageError>("plan: --print-after prints text; drop --json");
  std::vector<compiler::PassRecord> pre_rec, dec_rec;
  std::string pre_ir, dec_ir;
  compiler::Plan pre = compiler::plan_header(config, a.seq, 0, cache, opts);
  run_pipeline(pre, names, cache, a.print_after, pre_rec, pre_ir);
  // Decode right after the prompt by default; one position must stay free.
  const int64_t at = a.decode_at >= 0 ? a.decode_at : std::min(a.seq, pre.context - 1);
  compiler::Plan dec = compiler::plan_header(config, 1, at, cache, opts);
  run_pipeline(dec, names, cache, a.print_after, dec_rec, dec_ir);
  std::vector<PassRow> rows;
  for (size_t i = 0; i < pre_rec.size(); ++i) rows.push_back({pre_rec[i], dec_rec.at(i)});
  // One physical bound per model (compiler/style_published.h), whatever the plan.
  const compiler::ModelBounds b = compiler::model_bounds(config, a.seq, spec);
  std::vector<const npu::Design*> designs;
  for (const auto* p : {&pre, &dec})
    for (const auto& st : p->steps)
      for (const auto& l : st.launches)
        if (l.op) designs.push_back(&l.op->design);
  const auto free_kernels = unconstrained(designs, spec);
  if (a.json) {
    nlohmann::json j = summary_json(a, pre, dec, rows);
    add_context(j, spec, b, free_kernels);
    j["prefill_over_bound"] = pre.predicted_seconds() / b.prefill_bound_seconds;
    j["decode_over_bound"] = dec.predicted_seconds() / b.decode_bound_seconds_per_token;
    // tune-tiles: chosen, runner-up and builder default per (op, shape).
    j["tile_choices"] = {{"prefill", compiler::tile_decision_rows(pre, cache)},
                         {"decode", compiler::tile_decision_rows(dec, cache)}};
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  if (!a.print_after.empty()) fmt::print("{}\n{}\n", pre_ir, dec_ir);
  else fmt::print("{}\n{}\n", pre.dump(), dec.dump());
  for (const PassRow& r : rows) fmt::print("{}\n", pass_line(r));
  fmt::print("summary {} style={} spec={} context={}\n", pre.model, a.style, pre.spec,
             pre.context);
  fmt::print("  prefill S={}: {:.4g} ms ({:.4g} tok/s), {} dispatches, {} per layer\n", pre.seq,
             pre.predicted_seconds() * 1e3, pre.seq / pre.predicted_seconds(), pre.dispatches(),
             pre.dispatches_per_layer());
  fmt::print("  decode P={}: {:.4g} ms per token ({:.4g} tok/s), {} dispatches, {} per layer\n",
             dec.past, dec.predicted_seconds() * 1e3, 1.0 / dec.predicted_seconds(),
             dec.dispatches(), dec.dispatches_per_layer());
  print_context(spec, b, pre.predicted_seconds(), dec.predicted_seconds(), free_kernels);
  return 0;
}

cli::Action setup_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "plan", "Compile a model into its dispatch plan and print predicted times (no weights)");
  auto a = std::make_shared<PlanArgs>();
  cmd->add_option("-m,--model", a->model_dir, "Model directory (config.json is enough)");
  cmd->add_option("--preset", a->preset, "Built-in preset");
  cmd->add_option("--style", a->style, "Lowering: per-op | default | iron | mlir-air")->capture_default_str();
  cmd->add_option("--seq", a->seq, "Prefill length S")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--context", a->context, "KV cache capacity (0: the model's, capped at 4096)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--decode-at", a->decode_at, "Decode position P (default: --seq)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--spec", a->spec, "Device: xdna2 | xdna1 | spec JSON file")->capture_default_str();
  cmd->add_flag("--json", a->json, "Print one JSON object instead of the text plan");
  cmd->add_option("--passes", a->passes, "Pass pipeline a,b,c (default: the style's)");
  cmd->add_option("--disable-pass", a->disabled, "Skip an optional pass (repeatable)");
  cmd->add_option("--print-after", a->print_after, "Print the plan IR after this pass");
  return [a, cmd] {
    if (!cmd->parsed()) return 0;
    return run_plan(*a);
  };
}
TESSERA_COMMAND("plan", setup_plan);

}  // namespace
