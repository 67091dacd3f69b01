// tessera deploy end to end on the tiny presets: the gates pass, the
// directory holds every artifact, a rerun resumes, a tampered artifact is
// redone (and issues.md says so), and planted bugs in the packed weights fail
// phase 2 (layer 0) or phase 3 (a later layer) with a report naming the tap.
// Also the derived phase-2 thresholds (the manifest: manifest_test.cpp).
#include <algorithm>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pipeline_test_util.h"
#include "tessera/compiler/graph.h"
#include "tessera/compiler/tile_choices.h"
#include "tessera/core/error.h"
#include "tessera/core/mutants.h"
#include "tessera/model/config.h"
#include "tessera/model/synth.h"
#include "tessera/pipeline/deploy.h"
#include "tessera/pipeline/deploy_thresholds.h"
#include "tessera/pipeline/manifest.h"

namespace tessera::pipeline {
namespace {

namespace fs = std::filesystem;
constexpr double u = 1.0 / 256.0;

// One directory per test process and name (parallel ctest runs processes side by side).
using test_util::scratch;

using test_util::slurp;

DeployOptions tiny_options(const std::string& preset, const fs::path& out) {
  DeployOptions o;
  o.preset = preset;
  o.out = out;
  o.gate_seq = 9;      // small: the unit suite must stay within seconds
  o.continuation = 6;  // the 32-token default runs in the slow suite
  o.last_phase = 6;    // phase 7 (the evaluator) is tested in evaluate_test.cpp
  o.spec = npu::DeviceSpec::preset("xdna2");
  return o;
}

std::vector<std::string> statuses(const DeployReport& r) {
  std::vector<std::string> s;
  for (const auto& p : r.phases) s.push_back(std::to_string(p.phase) + ":" + p.status);
  return s;
}

TEST(DeployThresholds, DerivedFromThePathAndExplained) {
  for (const auto* t : {&phase2_rules(), &phase3_rules(), &phase6_rules()})
    for (const auto& r : *t) EXPECT_FALSE(r.reason.empty()) << r.name;
  model::ModelConfig c = model::preset("tiny");
  c.num_layers = 1;
  const auto t = block_thresholds(compiler::build_graph(c, 9, 0));
  // Longer paths get larger budgets; every budget is at least one op's and far
  // below an error a real bug makes (a missing bias is ~0.3).
  EXPECT_GT(t.at("L0.h_out").max_rel, t.at("L0.attn_out").max_rel);
  EXPECT_GT(t.at("L0.attn_out").max_rel, t.at("L0.q_rot").max_rel);
  EXPECT_GE(t.at("L0.attn_norm").max_rel, 4 * u);
  EXPECT_LT(t.at("L0.h_out").max_rel, 0.12);
  EXPECT_GT(t.at("L0.h_out").min_cosine, 0.99);
  model::ModelConfig q = model::preset("tiny-qwen3");
  q.num_layers = 1;
  // q/k norms lengthen the path to q_rot.
  EXPECT_GT(block_thresholds(compiler::build_graph(q, 9, 0)).at("L0.q_rot").max_rel, t.at("L0.q_rot").max_rel);
}

TEST(Deploy, TinyPassesWritesArtifactsResumesAndRedoesTampered) {
  const fs::path out = scratch("tiny");
  DeployOptions o = tiny_options("tiny", out);
  const DeployReport r = deploy(o);
  ASSERT_TRUE(r.passed()) << r.failure();
  EXPECT_EQ(statuses(r), (std::vector<std::string>{"0:passed", "1:passed", "2:passed", "3:passed", "4:passed",
                                                 "5:passed", "6:passed"}));
  for (const char* f : {"manifest.json", "model/config.json", "model/tokenizer.json", "weights.safetensors",
                        "plan.txt", "plan.md", "issues.md", "report.json", "spec.json", "phase0.json",
                        "phase1.json", "phase2.json", "phase3.json", "phase4.json", "phase5.json",
                        "phase6.json", "perf_opt_traj.md", "plan_final.txt", "plan_final.md"})
    EXPECT_TRUE(fs::exists(out / f)) << f;
  const auto rep = nlohmann::json::parse(slurp(out / "report.json"));
  for (const char* k : {"model", "passed", "failure", "phases"}) EXPECT_TRUE(rep.contains(k)) << k;
  EXPECT_TRUE(rep["passed"].get<bool>());
  const auto p6 = rep["phases"][6]["details"];
  for (const char* k : {"prefill_predicted_seconds", "prefill_host_seconds", "decode_predicted_seconds_per_token",
                        "decode_host_seconds_per_token", "npu_tokens", "oracle_tokens", "disagreements"})
    EXPECT_TRUE(p6.contains(k)) << k;
  EXPECT_GT(p6["prefill_predicted_seconds"].get<double>(), 0);

  // Rerun: everything verified and skipped.
  const DeployReport again = deploy(o);
  ASSERT_TRUE(again.passed());
  for (const auto& p : again.phases) EXPECT_EQ(p.status, "skipped (resumed)") << p.phase;

  // Tampered packed weights: phase 2 (which wrote them) is redone, not trusted.
  {
    std::fstream f(out / "weights.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  const DeployReport redo = deploy(o);
  ASSERT_TRUE(redo.passed()) << redo.failure();
  // ...and every phase after it: their verdicts were reached on the old file.
  EXPECT_EQ(statuses(redo), (std::vector<std::string>{"0:skipped (resumed)", "1:skipped (resumed)", "2:passed",
                                                     "3:passed", "4:passed", "5:passed", "6:passed"}));
  const std::string issues = slurp(out / "issues.md");
  EXPECT_NE(issues.find("weights.safetensors: sha256 mismatch"), std::string::npos) << issues;
  EXPECT_NE(issues.find("repacked"), std::string::npos) << issues;

  // A tampered gate table is redone too.
  std::ofstream(out / "phase3.json", std::ios::app) << " ";
  const DeployReport redo3 = deploy(o);
  EXPECT_EQ(redo3.phases[3].status, "passed");
  EXPECT_NE(slurp(out / "issues.md").find("phase3.json: sha256 mismatch"), std::string::npos);
}

TEST(Deploy, TinyQwen3Passes) {
  const DeployReport r = deploy(tiny_options("tiny-qwen3", scratch("tiny-qwen3")));
  ASSERT_TRUE(r.passed()) << r.failure();
  // qk-norm taps are gated in phase 2.
  bool q_norm = false;
  for (const auto& c : r.phases[2].checks) q_norm |= c.name == "L0.q_norm";
  EXPECT_TRUE(q_norm);
  // Every op of the block (phase 2) and of the session's prefill at every
  // layer (phase 6) is gated locally (local_gate.h), and passes.
  EXPECT_GE(r.phases[2].details.value("local_checks", 0), 14);
  EXPECT_GE(r.phases[6].details.value("local_checks", 0), 28);
  bool local_rope = false;
  for (const auto& c : r.phases[6].checks) local_rope |= c.name == "session prefill local L1.k_rot";
  EXPECT_TRUE(local_rope);
  // Every op of each of the 5 decode steps is gated locally too, and passes.
  const auto& steps = r.phases[6].details.at("decode_step_checks");
  EXPECT_GE(steps.at("passed").get<int64_t>(), 5 * 28);
  EXPECT_EQ(steps.at("failed_steps").get<int64_t>(), 0);
}

// A half-ulp bias in the session's own RoPE table (a host input only the
// runtime path computes) is invisible end to end, where every error is shared;
// the local gate of the session's RoPE ops catches it.
TEST(Deploy, SessionRopeTruncateIsCaughtAtTheRopeOp) {
  set_active_mutant(Mutant::session_rope_truncate);
  const DeployReport r = deploy(tiny_options("tiny", scratch("rope-mutant")));
  set_active_mutant(Mutant::none);
  ASSERT_FALSE(r.passed());
  EXPECT_EQ(r.phases.back().phase, 6);
  EXPECT_NE(r.failure().find("session prefill local L0.q_rot"), std::string::npos) << r.failure();
  // Diagnosed on the session's own prefill values, not the executor's.
  const auto& d = r.phases.back().details.at("diagnoses").at(0);
  EXPECT_EQ(d.at("diagnoser"), "rope_table_precision") << d.dump();
  EXPECT_NE(d.at("cause").get<std::string>().find("truncated"), std::string::npos) << d.dump();
}

// Phase 6 with a session mutant (core/mutants.h): the first failing check and
// the diagnosis attached to it (details["diagnoses"][0]).
struct SessionBugSeen {
  std::string first_failed, diagnoser, cause, where;
  std::vector<std::string> phase5_failed;  // phase 5's failing checks (it does not stop the deploy)
};

SessionBugSeen session_bug(Mutant m, const std::string& dir) {
  set_active_mutant(m);
  const DeployReport r = deploy(tiny_options("tiny", scratch(dir)));
  set_active_mutant(Mutant::none);
  SessionBugSeen s;
  EXPECT_FALSE(r.passed());
  if (r.passed() || r.phases.back().phase != 6) return s;
  for (const auto& c : r.phases[5].checks)
    if (!c.passed) s.phase5_failed.push_back(c.name);
  for (const auto& c : r.phases.back().checks)
    if (!c.passed) {
      s.first_failed = c.name;
      break;
    }
  const auto& d = r.phases.back().details.at("diagnoses").at(0);
  s.diagnoser = d.at("diagnoser");
  s.cause = d.at("cause");
  s.where = d.at("where");
  return s;
}

// Issue 12: a session bug in a decode step is gated at that step and op
// (phase6_steps.h) and diagnosed by a known pattern, not "unknown".
TEST(Deploy, SessionDecodeRopeAtTheNextPositionIsNamedAtItsStep) {
  const SessionBugSeen s = session_bug(Mutant::session_decode_rope_next_pos, "rope-next");
  EXPECT_EQ(s.first_failed, "decode step 0 local L0.q_rot");
  EXPECT_EQ(s.diagnoser, "rope_position_offset");
  EXPECT_NE(s.cause.find("off by +1"), std::string::npos) << s.cause;
  EXPECT_EQ(s.where.rfind("phase 6 decode step 0 node L0.q_rot (rope ", 0), 0u) << s.where;
  // Phase 5 fails its decode gate with every pass, and without them too: it
  // rolls no pass back in the bug's name.
  EXPECT_EQ(s.phase5_failed, std::vector<std::string>{"decode path with the kept passes"});
}

TEST(Deploy, SessionStuckPositionIsNamedAtItsStep) {
  const SessionBugSeen s = session_bug(Mutant::session_stuck_pos, "stuck-pos");
  EXPECT_EQ(s.first_failed, "decode step 1 position");
  EXPECT_EQ(s.diagnoser, "rope_position_offset");
  EXPECT_NE(s.cause.find("off by -1"), std::string::npos) << s.cause;
}

// The executor takes the row before the prompt's last real token for the LM
// head of a bucketed prefill: named by the row-view diagnoser, not "unknown".
TEST(Deploy, SessionLastRowOffByOneIsNamed) {
  const SessionBugSeen s = session_bug(Mutant::exec_last_row_prev, "last-row-prev");
  EXPECT_EQ(s.diagnoser, "row_view_offset") << s.first_failed << " | " << s.cause;
  EXPECT_NE(s.where.find("logits"), std::string::npos) << s.where;
}

// The last layer's cache keeps row P - 1 in place of row P: the next step's
// kv_append gets an old row that differs from what the NPU wrote (a cache the
// caller kept wrong, not a write at the wrong place nor an attention read).
TEST(Deploy, SessionStaleCacheRowIsNamedAtTheNextStepsKvAppend) {
  const SessionBugSeen s = session_bug(Mutant::session_kv_stale_row, "stale-row");
  const std::string last = "L" + std::to_string(model::preset("tiny").num_layers - 1);
  EXPECT_EQ(s.first_failed, "decode step 1 local " + last + ".k_cache");
  EXPECT_EQ(s.diagnoser, "kv_cache_rows");
  EXPECT_NE(s.cause.find("holding row"), std::string::npos) << s.cause;
}

// Deploys tiny with `weight` negated on the device; returns the report, which
// must have stopped at `phase`.
DeployReport planted(const std::string& weight, int phase, const std::string& dir) {
  DeployOptions o = tiny_options("tiny", scratch(dir));
  o.tamper_packed = negate_packed_weight(weight);
  DeployReport r = deploy(o);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.phases.back().phase, phase);
  EXPECT_NE(slurp(o.out / "issues.md").find("FAILED"), std::string::npos);
  return r;
}

TEST(Deploy, PlantedBugInLayer0FailsPhase2NamingTheTap) {
  const DeployReport r = planted("w:L0.v_proj@", 2, "bug0");
  EXPECT_NE(r.failure().find("phase 2 (block): L0.v "), std::string::npos) << r.failure();
  EXPECT_NE(r.failure().find("cosine"), std::string::npos) << r.failure();
}

TEST(Deploy, PlantedBugInALaterLayerFailsPhase3NamingTheLayer) {
  const DeployReport r = planted("w:L2.down_proj@", 3, "bug2");
  EXPECT_NE(r.failure().find("phase 3 (model): L2.h_out"), std::string::npos) << r.failure();
}

// Phases 4 / 5 keep the passes that hold: the optimized plans are faster,
// fused, and perf_opt_traj.md has a row per pass tried; the final plan IR
// reads back.
TEST(Deploy, PhasesFourAndFiveKeepPassesAndLogThem) {
  const fs::path out = scratch("opt");
  const DeployReport r = deploy(tiny_options("tiny", out));
  ASSERT_TRUE(r.passed()) << r.failure();
  for (int phase : {4, 5}) {
    const PhaseResult& p = r.phases[static_cast<size_t>(phase)];
    EXPECT_EQ(p.details["passes"], (std::vector<std::string>{"place", "build", "tune-tiles", "kv-resident", "align-layouts", "fuse", "buffers", "reuse-buffers"}));
    for (const auto& t : p.details["tried"]) EXPECT_TRUE(t["kept"].get<bool>()) << t.dump();
  }
  const auto& tried4 = r.phases[4].details["tried"];
  ASSERT_EQ(tried4[3]["pass"], "fuse");
  EXPECT_LE(tried4[2]["prefill_after"].get<double>(), tried4[2]["prefill_before"].get<double>());
  EXPECT_LT(tried4[3]["prefill_after"].get<double>(), tried4[3]["prefill_before"].get<double>());
  // tune-tiles logs its choices (chosen, runner-up, default) in the row.
  ASSERT_EQ(tried4[0]["pass"], "tune-tiles");
  ASSERT_TRUE(tried4[0].contains("tiles")) << tried4[0].dump();
  for (const auto& c : tried4[0]["tiles"])
    EXPECT_LE(c["chosen_seconds"].get<double>(), c["default_seconds"].get<double>()) << c.dump();
  // Phase 5's kv-resident is tried and gated. It is judged at the end of the
  // context (one choice per session), so the session phase 5 gates, decoding
  // right after tiny's 17-token prompt, runs the resident head-major cache on
  // real numbers, as a long session does; at P = 17 alone it would not pay.
  const auto& tried5 = r.phases[5].details["tried"];
  ASSERT_EQ(tried5[1]["pass"], "kv-resident");
  EXPECT_TRUE(tried5[1]["kept"].get<bool>());
  const std::string traj = slurp(out / "perf_opt_traj.md");
  EXPECT_NE(traj.find("| 4 | fuse |"), std::string::npos) << traj;
  EXPECT_NE(traj.find("| 5 | reuse-buffers |"), std::string::npos) << traj;
  EXPECT_NE(traj.find("## tune-tiles, phase 5"), std::string::npos) << traj;
  // run and a resumed deploy read the decisions back, none stale.
  EXPECT_GT(compiler::TileChoices::load(out / "tile_choices.json").size(), 0u);
  const std::string final_plan = slurp(out / "plan_final.txt");
  compiler::DesignCache cache(npu::DeviceSpec::preset("xdna2"));
  const std::string prefill = final_plan.substr(0, final_plan.find("\n\nplan ") + 1);
  EXPECT_EQ(compiler::parse_plan(prefill, cache).dump(), prefill);
  EXPECT_NE(final_plan.find("cache_head_dim="), std::string::npos) << "the decode plan's resident cache";
}

// A pass with a planted bug is rolled back and named; the deploy goes on.
TEST(Deploy, PlantedPassBugIsRolledBackAndNamed) {
  DeployOptions o = tiny_options("tiny", scratch("passbug"));
  o.plant_pass_bug = "fuse";
  const DeployReport r = deploy(o);
  ASSERT_TRUE(r.passed()) << r.failure();
  for (int phase : {4, 5}) {
    const PhaseResult& p = r.phases[static_cast<size_t>(phase)];
    auto fuse = std::find_if(p.checks.begin(), p.checks.end(),
                             [](const auto& c) { return c.name == "pass fuse"; });
    ASSERT_NE(fuse, p.checks.end());
    EXPECT_FALSE(fuse->passed);
    EXPECT_NE(fuse->message.find("pass 'fuse' broke the plan"), std::string::npos) << fuse->message;
  }
  const std::string issues = slurp(o.out / "issues.md");
  EXPECT_NE(issues.find("phase 4: pass 'fuse' rolled back"), std::string::npos) << issues;
  EXPECT_NE(slurp(o.out / "perf_opt_traj.md").find("failed (rolled back)"), std::string::npos);
}

// kv-resident's planted bug (the cache declared resident, the attention still
// reading its own copy) touches decode plans only: phase 5 rolls it back and
// names it, phase 4 keeps the pass (its prefill plan has no decode cache).
TEST(Deploy, PlantedKvResidentBugIsRolledBackInPhaseFive) {
  DeployOptions o = tiny_options("tiny", scratch("kvbug"));
  o.plant_pass_bug = "kv-resident";
  const DeployReport r = deploy(o);
  ASSERT_TRUE(r.passed()) << r.failure();
  auto check = [&](int phase) {
    const auto& cs = r.phases[static_cast<size_t>(phase)].checks;
    auto c = std::find_if(cs.begin(), cs.end(), [](const auto& x) { return x.name == "pass kv-resident"; });
    EXPECT_NE(c, cs.end());
    return c == cs.end() ? GateCheck{} : *c;
  };
  EXPECT_TRUE(check(4).passed);
  const GateCheck five = check(5);
  EXPECT_FALSE(five.passed);
  EXPECT_NE(five.message.find("the elided copy is needed"), std::string::npos) << five.message;
  EXPECT_NE(slurp(o.out / "issues.md").find("phase 5: pass 'kv-resident' rolled back"),
            std::string::npos);
}

// tune-tiles' planted bug (the slowest option the search timed) passes every
// numeric gate: only the pass's own comparison with the builder default
// catches it, and phase 5 rolls it back on that, naming the launch.
TEST(Deploy, PlantedTuneTilesBugIsRolledBackInPhaseFive) {
  DeployOptions o = tiny_options("tiny", scratch("tunebug"));
  o.plant_pass_bug = "tune-tiles";
  const DeployReport r = deploy(o);
  ASSERT_TRUE(r.passed()) << r.failure();
  const auto& cs = r.phases[5].checks;
  auto c = std::find_if(cs.begin(), cs.end(), [](const auto& x) { return x.name == "pass tune-tiles"; });
  ASSERT_NE(c, cs.end());
  EXPECT_FALSE(c->passed);
  EXPECT_NE(c->message.find("slower than the builder default"), std::string::npos) << c->message;
  EXPECT_NE(slurp(o.out / "issues.md").find("phase 5: pass 'tune-tiles' rolled back"), std::string::npos);
}

TEST(Deploy, RejectsBadOptionsBeforeAnyWork) {
  DeployOptions o = tiny_options("tiny", scratch("bad"));
  o.model_dir = "/nonexistent";
  EXPECT_THROW(deploy(o), UsageError);
  o = tiny_options("tiny", scratch("bad"));
  o.gate_seq = 1;
  EXPECT_THROW(deploy(o), UsageError);
  o = tiny_options("tiny", "");
  EXPECT_THROW(deploy(o), UsageError);
  // Prompt + continuation past the context: refused before phase 0 runs.
  o = tiny_options("tiny", scratch("bad"));
  o.gate_seq = 2000;
  o.continuation = 100;
  EXPECT_THROW(deploy(o), UsageError);
  EXPECT_FALSE(fs::exists(o.out));
  // A directory with someone else's files is not a deployment to write into.
  o = tiny_options("tiny", scratch("bad"));
  fs::create_directories(o.out);
  std::ofstream(o.out / "notes.txt") << "mine";
  EXPECT_THROW(deploy(o), UsageError);
}

// Deploy options on a 1-layer synthetic model directory (not a preset): the
// source can be edited between deploys as a user's model would be.
DeployOptions dir_options(const fs::path& root, const std::string& out) {
  DeployOptions o = tiny_options("", root / out);
  o.model_dir = root / "m";
  o.gate_seq = 5;  // these tests are about the directory, not the gates: the smallest deploy
  o.continuation = 3;
  if (!fs::exists(o.model_dir)) model::write_synthetic_model(model::preset("tiny"), o.model_dir, 1, 1);
  return o;
}

// Sets the last bf16 of the source's model.safetensors (the final norm's last element).
void edit_last_weight(const fs::path& model_dir, uint16_t bits) {
  std::fstream f(model_dir / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-2, std::ios::end);
  f.put(static_cast<char>(bits & 0xff));
  f.put(static_cast<char>(bits >> 8));
}

// Issue 13 case 1: a changed source tensor must give new packed weights, the
// ones a fresh deployment of that source gets, not the old file because its
// own sha256 still matches.
TEST(Deploy, SourceChangeRepacksTheWeights) {
  const fs::path root = scratch("source-change");
  DeployOptions o = dir_options(root, "d");
  ASSERT_TRUE(deploy(o).passed());
  const std::string before = sha256_file(o.out / "weights.safetensors");
  edit_last_weight(o.model_dir, 0x4040);  // 3.0
  const DeployReport r = deploy(o);
  ASSERT_TRUE(r.passed()) << r.failure();
  EXPECT_EQ(statuses(r), (std::vector<std::string>{"0:passed", "1:passed", "2:passed", "3:passed", "4:passed", "5:passed", "6:passed"}));
  const std::string after = sha256_file(o.out / "weights.safetensors");
  EXPECT_NE(after, before);
  DeployOptions fresh = dir_options(root, "fresh");
  ASSERT_TRUE(deploy(fresh).passed());
  EXPECT_EQ(sha256_file(fresh.out / "weights.safetensors"), after);
}

const std::vector<std::string> kRunFiles = {"model/config.json", "model/tokenizer.json", "spec.json",
                                            "weights.safetensors"};

// Cases 2 and 11: a redeploy with a planted bug is not skipped, fails phase 2,
// and leaves no later phase claiming to have passed; check_deployment refuses
// the directory until a clean redeploy.
TEST(Deploy, FailedRedeployLeavesNoPassedLaterPhase) {
  DeployOptions o = dir_options(scratch("failed-redeploy"), "d");
  ASSERT_TRUE(deploy(o).passed());
  EXPECT_TRUE(check_deployment(o.out, Manifest::load(o.out), kRunFiles).empty());
  o.tamper_packed = negate_packed_weight("w:L0.v_proj@");
  const DeployReport bad = deploy(o);
  EXPECT_FALSE(bad.passed());
  EXPECT_EQ(statuses(bad), (std::vector<std::string>{"0:skipped (resumed)", "1:skipped (resumed)", "2:failed"}));
  const Manifest m = Manifest::load(o.out);
  EXPECT_EQ(m.phases.at(2).status, "failed");
  EXPECT_FALSE(m.phases.count(3));
  EXPECT_FALSE(m.phases.count(6));
  EXPECT_FALSE(m.artifacts.count("phase3.json"));
  const auto problems = check_deployment(o.out, m, kRunFiles);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("phase 2 has status 'failed'"), std::string::npos) << problems[0];
  o.tamper_packed = {};
  const DeployReport good = deploy(o);
  EXPECT_EQ(statuses(good), (std::vector<std::string>{"0:skipped (resumed)", "1:skipped (resumed)", "2:passed",
                                                      "3:passed", "4:passed", "5:passed", "6:passed"}));
  EXPECT_TRUE(check_deployment(o.out, Manifest::load(o.out), kRunFiles).empty());
}

// Case 3: an edited config whose new sha256 is written into a resealed
// manifest is still caught: by the verdict chain (later phases recorded the
// old file) and by a resumed deploy, which re-derives the file from the source.
TEST(Deploy, ManifestCannotVouchForAnEditedConfig) {
  DeployOptions o = dir_options(scratch("edited-config"), "d");
  ASSERT_TRUE(deploy(o).passed());
  const std::string original = slurp(o.out / "model/config.json");
  auto cfg = nlohmann::json::parse(original);
  cfg["rms_norm_eps"] = 0.5;
  std::ofstream(o.out / "model/config.json") << cfg.dump(2) << "\n";
  Manifest m = Manifest::load(o.out);
  m.artifacts["model/config.json"].sha256 = sha256_file(o.out / "model/config.json");
  m.save(o.out);  // a careful forger reseals
  const auto problems = check_deployment(o.out, Manifest::load(o.out), kRunFiles);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("judged on another model/config.json"), std::string::npos) << problems[0];

  const DeployReport r = deploy(o);
  ASSERT_TRUE(r.passed()) << r.failure();
  EXPECT_EQ(r.phases[0].status, "passed");
  EXPECT_NE(slurp(o.out / "issues.md").find("model/config.json: not what the source"), std::string::npos);
  EXPECT_EQ(slurp(o.out / "model/config.json"), original);

  // Edited by hand without resealing: the whole manifest is distrusted.
  std::string text = slurp(o.out / "manifest.json");
  const std::string sha = sha256_file(o.out / "model/config.json");
  text.replace(text.find(sha), sha.size(), std::string(sha.size(), '0'));
  std::ofstream(o.out / "manifest.json") << text;
  std::string problem;
  EXPECT_TRUE(Manifest::load(o.out, &problem).phases.empty());
  EXPECT_NE(problem.find("seal"), std::string::npos) << problem;
}

// Case 9: one writer per directory.
TEST(Deploy, SecondWriterIsRefused) {
  DeployOptions o = tiny_options("tiny", scratch("locked"));
  fs::create_directories(o.out);
  {
    const DirLock held(o.out, DirLock::Mode::exclusive, "test");
    EXPECT_THROW(deploy(o), UsageError);
    EXPECT_THROW(DirLock(o.out, DirLock::Mode::shared, "run"), UsageError);
  }
  EXPECT_NO_THROW(DirLock(o.out, DirLock::Mode::shared, "run"));
}

// Case 10: an error inside a phase (here a corrupt tokenizer in phase 0) still
// writes report.json and issues.md naming the phase, then reaches the caller.
TEST(Deploy, ErrorInAPhaseIsReported) {
  DeployOptions o = dir_options(scratch("phase-error"), "d");
  std::ofstream(o.model_dir / "tokenizer.json") << "{\"model\": 1}";
  EXPECT_THROW(deploy(o), TokenizerError);
  const auto rep = nlohmann::json::parse(slurp(o.out / "report.json"));
  EXPECT_FALSE(rep["passed"].get<bool>());
  EXPECT_NE(rep["failure"].get<std::string>().find("phase 0 (oracle): "), std::string::npos) << rep["failure"];
  EXPECT_NE(slurp(o.out / "issues.md").find("FAILED"), std::string::npos);
  EXPECT_EQ(Manifest::load(o.out).phases.at(0).status, "failed");
}

}  // namespace
}  // namespace tessera::pipeline
