// tessera deploy end to end on the tiny presets: the gates pass, the
// directory holds every artifact, a rerun resumes, a tampered artifact is
// redone (and issues.md says so), and planted bugs in the packed weights fail
// phase 2 (layer 0) or phase 3 (a later layer) with a report naming the tap.
// Also the manifest's sha256 and the derived phase-2 thresholds.
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/compiler/graph.h"
#include "tessera/core/error.h"
#include "tessera/model/config.h"
#include "tessera/pipeline/deploy.h"
#include "tessera/pipeline/deploy_thresholds.h"
#include "tessera/pipeline/manifest.h"

namespace tessera::pipeline {
namespace {

namespace fs = std::filesystem;
constexpr double u = 1.0 / 256.0;

// One directory per test process and name (parallel ctest runs processes side by side).
fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("tessera-deploy-test-" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  return p;
}

std::string slurp(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

DeployOptions tiny_options(const std::string& preset, const fs::path& out) {
  DeployOptions o;
  o.preset = preset;
  o.out = out;
  o.gate_seq = 9;      // small: the unit suite must stay within seconds
  o.continuation = 6;  // the 32-token default runs in the slow suite
  o.spec = npu::DeviceSpec::preset("xdna2");
  return o;
}

std::vector<std::string> statuses(const DeployReport& r) {
  std::vector<std::string> s;
  for (const auto& p : r.phases) s.push_back(std::to_string(p.phase) + ":" + p.status);
  return s;
}

TEST(Manifest, Sha256AndStaleArtifacts) {
  EXPECT_EQ(sha256_text("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const fs::path d = scratch("manifest");
  fs::create_directories(d);
  std::ofstream(d / "a.json") << "{}";
  Manifest m;
  m.record(d, "a.json", 2);
  m.phases[2] = {"passed", {{"options", "x"}}};
  m.save(d);
  Manifest back = Manifest::load(d);
  EXPECT_TRUE(back.stale(d, 2).empty());
  EXPECT_EQ(back.phases.at(2).inputs.at("options"), "x");
  std::ofstream(d / "a.json") << "{\"edited\": 1}";
  ASSERT_EQ(back.stale(d, 2).size(), 1u);
  EXPECT_NE(back.stale(d, 2)[0].find("a.json"), std::string::npos);
  std::ofstream(d / "manifest.json") << "not json";
  std::string problem;
  EXPECT_TRUE(Manifest::load(d, &problem).artifacts.empty());
  EXPECT_FALSE(problem.empty());
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
  EXPECT_EQ(statuses(redo), (std::vector<std::string>{"0:skipped (resumed)", "1:skipped (resumed)", "2:passed",
                                                     "3:skipped (resumed)", "4:skipped (resumed)",
                                                     "5:skipped (resumed)", "6:skipped (resumed)"}));
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
    EXPECT_EQ(p.details["passes"], (std::vector<std::string>{"place", "build", "fuse", "buffers", "reuse-buffers"}));
    for (const auto& t : p.details["tried"]) EXPECT_TRUE(t["kept"].get<bool>()) << t.dump();
  }
  const auto& tried4 = r.phases[4].details["tried"];
  EXPECT_LT(tried4[0]["prefill_after"].get<double>(), tried4[0]["prefill_before"].get<double>());
  const std::string traj = slurp(out / "perf_opt_traj.md");
  EXPECT_NE(traj.find("| 4 | fuse |"), std::string::npos) << traj;
  EXPECT_NE(traj.find("| 5 | reuse-buffers |"), std::string::npos) << traj;
  const std::string final_plan = slurp(out / "plan_final.txt");
  compiler::DesignCache cache(npu::DeviceSpec::preset("xdna2"));
  const std::string prefill = final_plan.substr(0, final_plan.find("\n\nplan ") + 1);
  EXPECT_EQ(compiler::parse_plan(prefill, cache).dump(), prefill);
}

// A pass with a planted bug is rolled back and named; the deploy goes on.
TEST(Deploy, PlantedPassBugIsRolledBackAndNamed) {
  DeployOptions o = tiny_options("tiny", scratch("passbug"));
  o.plant_pass_bug = "fuse";
  const DeployReport r = deploy(o);
  ASSERT_TRUE(r.passed()) << r.failure();
  for (int phase : {4, 5}) {
    const PhaseResult& p = r.phases[static_cast<size_t>(phase)];
    ASSERT_FALSE(p.checks.empty());
    EXPECT_EQ(p.checks[0].name, "pass fuse");
    EXPECT_FALSE(p.checks[0].passed);
    EXPECT_NE(p.checks[0].message.find("pass 'fuse' broke the plan"), std::string::npos) << p.checks[0].message;
  }
  const std::string issues = slurp(o.out / "issues.md");
  EXPECT_NE(issues.find("phase 4: pass 'fuse' rolled back"), std::string::npos) << issues;
  EXPECT_NE(slurp(o.out / "perf_opt_traj.md").find("failed (rolled back)"), std::string::npos);
}

TEST(Deploy, RejectsBadOptions) {
  DeployOptions o = tiny_options("tiny", scratch("bad"));
  o.model_dir = "/nonexistent";
  EXPECT_THROW(deploy(o), UsageError);
  o = tiny_options("tiny", scratch("bad"));
  o.gate_seq = 1;
  EXPECT_THROW(deploy(o), UsageError);
  o = tiny_options("tiny", "");
  EXPECT_THROW(deploy(o), UsageError);
}

}  // namespace
}  // namespace tessera::pipeline
