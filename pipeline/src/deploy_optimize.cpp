// Phases 4 (prefill optimization) and 5 (decode optimization): the style's
// optimization passes (compiler/passes.h) are added to the plan one at a
// time. After each, phase 4 re-runs the numeric gates of phases 2 and 3 on
// the new prefill plans, phase 5 runs the session (prefill + teacher-forced
// decode steps) on the new decode plans and gates every step's logits like
// phase 6 does. A pass is kept only when its gates pass; one that breaks a
// gate or the plan's invariants is rolled back and named (issues.md, the
// phase's checks), and the phase goes on with the passes that held. Every
// pass tried appends a row to perf_opt_traj.md.
#include <algorithm>
#include <chrono>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deploy_internal.h"
#include "tessera/compiler/passes.h"
#include "tessera/compiler/tile_choices.h"
#include "tessera/core/error.h"
#include "tessera/runtime/sampler.h"
#include "tessera/runtime/session.h"

namespace tessera::pipeline::detail {

namespace {

using Clock = std::chrono::steady_clock;

// The style's optimization passes, canonical order.
std::vector<std::string> optional_passes(compiler::PlanStyle style) {
  std::vector<std::string> out;
  for (const std::string& p : compiler::style_passes(style))
    for (const auto& info : compiler::pass_registry())
      if (p == info.name && !info.required) out.push_back(p);
  return out;
}

// `base` plus `pass`, in the registry's order.
std::vector<std::string> with_pass(const std::vector<std::string>& base, const std::string& pass) {
  std::vector<std::string> out;
  for (const auto& info : compiler::pass_registry())
    if (info.name == pass || std::find(base.begin(), base.end(), info.name) != base.end())
      out.push_back(info.name);
  return out;
}

// Phase 3's logits cosine floor (phase3.json is current when phase 4 / 5 run).
double logits_floor(const fs::path& out) {
  std::ifstream in(out / "phase3.json");
  if (!in) throw_error<InternalError>("phases 4 / 5 need phase3.json in {}", out.string());
  const auto j = nlohmann::json::parse(in);
  for (const auto& c : j.at("checks"))
    if (c.at("name") == "logits") return c.at("threshold").at("min_cosine").get<double>();
  throw_error<InternalError>("phase3.json has no logits check");
}

// Prefill gates: phases 2 and 3 on the current plans. "" when both pass.
std::string prefill_gates(Context& ctx) {
  std::vector<std::string> ignored;
  for (PhaseResult r : {gate_block(ctx), run_phase3(ctx, ignored)})
    for (const GateCheck& c : r.checks)
      if (!c.passed) return fmt::format("phase {} {}: {}", r.phase, c.name, c.message);
  return "";
}

// Decode gate: the session with the current decode passes, teacher-forced on
// the oracle's continuation (up to 3 steps), logits cosine >= phase 3's floor.
std::string decode_gates(Context& ctx) {
  const OracleRun& orc = ctx.oracle();
  const double floor = logits_floor(ctx.out);
  runtime::SessionOptions so;
  so.style = ctx.opts.style;
  so.prefill_passes = ctx.plan_options(false).passes;
  so.decode_passes = ctx.plan_options(true).passes;
  so.tile_choices = ctx.cache().shared_tile_choices();  // tune-tiles searched for these plans already
  runtime::Session s(ctx.config, ctx.packed(), ctx.opts.spec, so);
  s.prefill(orc.prompt);
  const size_t n = std::min<size_t>(orc.continuation.size(), 4);
  for (size_t i = 1; i < n; ++i) {
    const std::vector<float> logits = s.decode(orc.continuation[i - 1]);
    const Metrics m = compare(orc.step_row(i, ctx.config.vocab_size), logits);
    if (!(m.cosine >= floor))
      return fmt::format("decode step {} logits cosine {:.6f} < {:.6f}", i, m.cosine, floor);
  }
  return "";
}

// A decode failure is a pass's only when the path without it holds: a bug
// outside the passes (the session, a kernel) fails every trial alike and
// would otherwise roll every pass back in its name. "" when the decode gate
// passes with the `kept` passes alone.
std::string failure_without_pass(Context& ctx, const std::vector<std::string>& kept) {
  ctx.set_passes(true, kept);
  try {
    return decode_gates(ctx);
  } catch (const InternalError& e) {
    return e.what();
  }
}

std::string ms(double s) { return fmt::format("{:.4g} ms", s * 1e3); }

PhaseResult optimize(Context& ctx, bool decode) {
  const auto t0 = Clock::now();
  const int phase = decode ? 5 : 4;
  PhaseResult r{phase, decode ? "decode optimization" : "prefill optimization", "passed", {}, 0,
                nlohmann::json::object()};
  // The plan before this phase: required passes (and, for phase 5, the
  // prefill passes phase 4 kept are already in place).
  std::vector<std::string> kept = ctx.plan_options(decode).passes;
  ctx.set_passes(decode, kept);
  nlohmann::json tried = nlohmann::json::array();
  for (const std::string& pass : optional_passes(ctx.opts.style)) {
    const double pre0 = ctx.prefill_plan().predicted_seconds(), dec0 = ctx.decode_plan().predicted_seconds();
    const auto bounds0 = (decode ? ctx.decode_plan() : ctx.prefill_plan()).bound_seconds();
    const int64_t arena0 = (decode ? ctx.decode_plan() : ctx.prefill_plan()).arena_bytes();
    ctx.set_passes(decode, with_pass(kept, pass));
    std::string failure;
    double pre1 = pre0, dec1 = dec0;
    std::string moved = "-";
    try {
      pre1 = ctx.prefill_plan().predicted_seconds();
      dec1 = ctx.decode_plan().predicted_seconds();
      const auto bounds1 = (decode ? ctx.decode_plan() : ctx.prefill_plan()).bound_seconds();
      double delta = 0;
      for (const auto& [term, secs] : bounds1) {
        const double d = secs - (bounds0.count(term) ? bounds0.at(term) : 0.0);
        if (std::abs(d) > std::abs(delta)) delta = d, moved = fmt::format("{} {:+.4g} ms", term, d * 1e3);
      }
      const int64_t arena1 = (decode ? ctx.decode_plan() : ctx.prefill_plan()).arena_bytes();
      if (moved == "-" && arena1 != arena0) moved = fmt::format("activation arena {} -> {} bytes", arena0, arena1);
      failure = decode ? decode_gates(ctx) : prefill_gates(ctx);
    } catch (const InternalError& e) {  // a pass that breaks the plan's invariants
      failure = e.what();
    }
    if (const std::string base = decode && !failure.empty() ? failure_without_pass(ctx, kept) : ""; !base.empty()) {
      const std::string why = fmt::format("the decode gate fails without pass '{}' too ({}): no pass can be judged "
                                          "on this path; phase 6 localizes the failure", pass, base);
      ctx.issues.push_back(fmt::format("phase {}: {}", phase, why));
      GateCheck c{"decode path with the kept passes", {}, {}, false, why};
      c.threshold.op = "pass";
      c.threshold.reason = "decode logits of the session as gated by phase 3's floor, before any further pass";
      r.checks.push_back(std::move(c));
      tried.push_back({{"phase", phase}, {"pass", pass}, {"kept", false}, {"prefill_before", pre0},
                       {"prefill_after", pre0}, {"decode_before", dec0}, {"decode_after", dec0}, {"moved", moved},
                       {"failure", "not judged: " + why}});
      break;
    }
    const bool held = failure.empty();
    if (held) kept = with_pass(kept, pass);
    else ctx.issues.push_back(fmt::format("phase {}: pass '{}' rolled back: {}", phase, pass, failure));
    ctx.set_passes(decode, kept);
    GateCheck c{"pass " + pass, {}, {}, held, held ? "" : failure};
    c.threshold.op = "pass";
    c.threshold.reason = decode ? "decode logits of the session as gated by phase 3's floor"
                                : "phases 2 and 3 gates on the new plans";
    r.checks.push_back(std::move(c));
    tried.push_back({{"phase", phase}, {"pass", pass}, {"kept", held}, {"prefill_before", pre0},
                     {"prefill_after", held ? pre1 : pre0}, {"decode_before", dec0},
                     {"decode_after", held ? dec1 : dec0}, {"moved", moved}, {"failure", failure}});
    if (pass == "tune-tiles" && held)
      tried.back()["tiles"] =
          compiler::tile_decision_rows(decode ? ctx.decode_plan() : ctx.prefill_plan(), ctx.cache());
    ctx.progress(fmt::format("phase {}: passes", phase), tried.size(), optional_passes(ctx.opts.style).size());
  }
  const compiler::Plan& pre = ctx.prefill_plan();
  const compiler::Plan& dec = ctx.decode_plan();
  r.details = {{"passes", kept}, {"tried", tried},
               {"prefill_predicted_seconds", pre.predicted_seconds()},
               {"decode_predicted_seconds", dec.predicted_seconds()},
               {"dispatches_per_layer_prefill", pre.dispatches_per_layer()},
               {"dispatches_per_layer_decode", dec.dispatches_per_layer()}};
  r.host_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

// perf_opt_traj.md: the rows phase 4 (phase4.json) and phase 5 tried.
std::string trajectory(Context& ctx, const nlohmann::json& phase5_tried) {
  std::string md = fmt::format(
      "# Optimization trajectory: {} ({} style, spec {})\n\nPredicted seconds (timing model + host "
      "model of this spec); a pass is kept only when its gates pass.\n\n| phase | pass | prefill S={} | "
      "decode P={} | bound that moved | gate |\n|---|---|---|---|---|---|\n",
      ctx.config.name, compiler::plan_style_name(ctx.opts.style), ctx.opts.spec.name, ctx.seq(), ctx.seq());
  nlohmann::json rows = nlohmann::json::array();
  std::ifstream in(ctx.out / "phase4.json");
  if (in) rows = nlohmann::json::parse(in).at("details").at("tried");
  for (const auto& t : phase5_tried) rows.push_back(t);
  for (const auto& t : rows)
    md += fmt::format("| {} | {} | {} -> {} | {} -> {} | {} | {} |\n", t.at("phase").get<int>(),
                      t.at("pass").get<std::string>(), ms(t.at("prefill_before").get<double>()),
                      ms(t.at("prefill_after").get<double>()), ms(t.at("decode_before").get<double>()),
                      ms(t.at("decode_after").get<double>()), t.at("moved").get<std::string>(),
                      t.at("kept").get<bool>() ? "passed (kept)"
                                               : "failed (rolled back): " + t.at("failure").get<std::string>());
  for (const auto& t : rows) {
    if (!t.contains("tiles")) continue;
    md += fmt::format("\n## tune-tiles, phase {}: tile search per (op, shape), predicted by the timing model\n\n"
                      "| op | chosen | runner-up | builder default | candidates |\n|---|---|---|---|---|\n",
                      t.at("phase").get<int>());
    for (const auto& c : t.at("tiles"))
      md += fmt::format("| {} | {} ({:.1f} us) | {} ({:.1f} us) | {} ({:.1f} us) | {} |\n",
                        c.at("op").get<std::string>(), c.at("chosen").get<std::string>(),
                        c.at("chosen_seconds").get<double>() * 1e6, c.at("runner_up").get<std::string>(),
                        c.at("runner_up_seconds").get<double>() * 1e6, c.at("default").get<std::string>(),
                        c.at("default_seconds").get<double>() * 1e6, c.at("candidates").get<int64_t>());
  }
  return md;
}

}  // namespace

PhaseResult run_phase4(Context& ctx, std::vector<std::string>&) { return optimize(ctx, false); }

// Also writes the final plans (plan_final.txt, the IR of the prefill and
// decode plans phases 4 and 5 kept; plan_final.md) and perf_opt_traj.md.
PhaseResult run_phase5(Context& ctx, std::vector<std::string>& artifacts) {
  load_optimized_passes(ctx, 4);  // phase 4's prefill passes (also when it was resumed)
  PhaseResult r = optimize(ctx, true);
  const compiler::Plan& pre = ctx.prefill_plan();
  const compiler::Plan& dec = ctx.decode_plan();
  write_text(ctx.out / "plan_final.txt", pre.dump() + "\n" + dec.dump());
  write_text(ctx.out / "plan_final.md", plan_markdown(pre, dec));
  write_text(ctx.out / "perf_opt_traj.md", trajectory(ctx, r.details.at("tried")));
  // run and a resumed deploy take the decisions from here (tile_choices.h).
  ctx.cache().tile_choices().save(ctx.out / "tile_choices.json");
  for (const char* a : {"perf_opt_traj.md", "plan_final.txt", "plan_final.md", "tile_choices.json"})
    artifacts.push_back(a);
  return r;
}

void load_optimized_passes(Context& ctx, int upto) {
  for (auto [phase, decode] : {std::pair{4, false}, std::pair{5, true}}) {
    if (phase > upto) break;
    std::ifstream in(ctx.out / fmt::format("phase{}.json", phase));
    if (!in) continue;
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("details") || !j["details"].contains("passes")) continue;
    ctx.set_passes(decode, j["details"]["passes"].get<std::vector<std::string>>());
  }
}

}  // namespace tessera::pipeline::detail
