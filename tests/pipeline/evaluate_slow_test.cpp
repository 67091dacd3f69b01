// (A _slow_test: each case deploys and evaluates the tiny model, ~12 s in release;
// the sanitizer run skips it, the release run keeps every planted case.)
// Phase 7, the independent evaluator (evaluate.h), on the tiny preset: a good
// deployment passes, and each planted defect fails with a check naming it even
// when the forger recomputed manifest.json (every sha256, every phase's
// inputs, the seal): a weakened threshold in a phase file, a flipped weight
// byte, a plan whose layouts do not match its weights, a report whose figures
// disagree with its phase files. Also report.html is well-formed XML.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pipeline_test_util.h"
#include "tessera/compiler/packed_weights.h"
#include "tessera/pipeline/deploy.h"
#include "tessera/pipeline/evaluate.h"
#include "tessera/pipeline/manifest.h"
#include "tessera/pipeline/report_html.h"

namespace tessera::pipeline {
namespace {

namespace fs = std::filesystem;

fs::path root() { return fs::temp_directory_path() / ("tessera-evaluate-test-" + std::to_string(::getpid())); }

using test_util::slurp;

void spit(const fs::path& f, const std::string& s) { std::ofstream(f, std::ios::binary) << s; }

// One tiny deployment (phases 0-6) shared by every test; each test edits its own copy.
const fs::path& base() {
  static const fs::path b = [] {
    DeployOptions o;
    o.preset = "tiny";
    o.out = root() / "base";
    fs::remove_all(o.out);
    o.gate_seq = 9;
    o.continuation = 4;
    o.last_phase = 6;
    o.spec = npu::DeviceSpec::preset("xdna2");
    const DeployReport r = deploy(o);
    EXPECT_TRUE(r.passed()) << r.failure();
    return o.out;
  }();
  return b;
}

fs::path copy_of(const std::string& name) {
  const fs::path d = root() / name;
  fs::remove_all(d);
  fs::copy(base(), d, fs::copy_options::recursive);
  return d;
}

// The forger's manifest: `rel`'s new sha256 everywhere it is recorded, resealed.
void forge(const fs::path& d, const std::string& rel) {
  std::string problem;
  Manifest m = Manifest::load(d, &problem);
  ASSERT_TRUE(problem.empty()) << problem;
  const std::string sha = sha256_file(d / rel);
  m.artifacts.at(rel).sha256 = sha;
  for (auto& [p, ph] : m.phases)
    if (auto it = ph.inputs.find(rel); it != ph.inputs.end()) it->second = sha;
  m.save(d);
}

Evaluation run(const fs::path& d) {
  EvaluateOptions o;
  o.dir = d;
  o.decode_tokens = 6;  // the 64-step default runs in the CLI test
  o.max_prompt = 17;
  return evaluate(o);
}

// The failed checks of `e` in `area`, one line each (also printed: the test
// log shows what evaluation.md says for each planted defect).
std::vector<std::string> failures(const Evaluation& e, const std::string& area) {
  std::vector<std::string> out;
  for (const auto& c : e.checks)
    if (c.severity == "fail" && c.area == area) out.push_back(c.name + ": " + c.evidence);
  for (const auto& f : out) std::cout << "  [" << e.verdict() << "] " << area << ": " << f << "\n";
  return out;
}

std::string all_failures(const Evaluation& e) {
  std::string s;
  for (const auto& c : e.checks)
    if (c.severity == "fail") s += c.area + " / " + c.name + ": " + c.evidence + "\n";
  return s;
}

TEST(Evaluate, GoodDeploymentPasses) {
  const fs::path d = copy_of("good");
  const Evaluation e = run(d);
  EXPECT_NE(e.verdict(), "FAIL") << all_failures(e);
  for (const char* area : {"integrity", "weights", "plan", "totals", "thresholds", "report", "numerics", "determinism"})
    EXPECT_TRUE(std::any_of(e.checks.begin(), e.checks.end(), [&](const EvalCheck& c) { return c.area == area && c.severity == "ok"; }))
        << "no passed check in " << area;
  // Fresh prompts: 1 token, odd, one past the pow2 bucket 16 (compiled as 32).
  const auto& prompts = e.measures.at("prompts");
  ASSERT_EQ(prompts.size(), 3u);
  EXPECT_EQ(prompts[0].at("tokens"), 1);
  EXPECT_EQ(prompts[2].at("tokens"), 17);
  EXPECT_EQ(prompts[2].at("bucket"), 32);
  write_evaluation(d, e);
  EXPECT_NE(slurp(d / "evaluation.md").find("**Verdict: "), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(slurp(d / "evaluation.json")).at("verdict"), e.verdict());
}

TEST(Evaluate, WeakenedThresholdInAPhaseFileFails) {
  const fs::path d = copy_of("weak");
  auto j = nlohmann::json::parse(slurp(d / "phase2.json"));
  j["checks"][0]["threshold"]["min_cosine"] = 0.5;
  spit(d / "phase2.json", j.dump(2) + "\n");
  forge(d, "phase2.json");
  const Evaluation e = run(d);
  EXPECT_EQ(e.verdict(), "FAIL");
  EXPECT_TRUE(failures(e, "integrity").empty()) << all_failures(e);  // the forgery holds
  const auto f = failures(e, "thresholds");
  ASSERT_EQ(f.size(), 1u) << all_failures(e);
  EXPECT_NE(f[0].find("phase2.json " + j["checks"][0]["name"].get<std::string>()), std::string::npos) << f[0];
  EXPECT_NE(f[0].find("weakened threshold: min_cosine 0.50000000 < canonical"), std::string::npos) << f[0];
}

TEST(Evaluate, FlippedWeightByteWithRecomputedManifestFails) {
  const fs::path d = copy_of("flip");
  compiler::PackedWeights pw = compiler::PackedWeights::load(d / "weights.safetensors");
  const std::string key = pw.keys().front();
  auto& bufs = pw.get_mut(key);
  bufs.begin()->second.mutable_bytes()[0] ^= std::byte{0x01};  // the lowest mantissa bit of one bf16
  pw.save(d / "weights.safetensors");
  forge(d, "weights.safetensors");
  const Evaluation e = run(d);
  EXPECT_EQ(e.verdict(), "FAIL");
  EXPECT_TRUE(failures(e, "integrity").empty()) << all_failures(e);
  const auto f = failures(e, "weights");
  ASSERT_EQ(f.size(), 1u) << all_failures(e);
  EXPECT_NE(f[0].find(key + " buffer " + bufs.begin()->first + ": byte 0"), std::string::npos) << f[0];
}

TEST(Evaluate, UnforgedTamperIsAnIntegrityFailure) {
  const fs::path d = copy_of("tamper");
  spit(d / "phase3.json", slurp(d / "phase3.json") + " ");
  const Evaluation e = run(d);
  const auto f = failures(e, "integrity");
  ASSERT_FALSE(f.empty());
  EXPECT_NE(f[0].find("phase3.json"), std::string::npos) << f[0];
}

TEST(Evaluate, PlanWhoseLayoutDoesNotMatchItsWeightsFails) {
  const fs::path d = copy_of("layout");
  const std::string text = slurp(d / "plan_final.txt");
  static const std::regex kKey("w:L0\\.q_proj@[0-9a-f]{8}");
  ASSERT_TRUE(std::regex_search(text, kKey)) << "plan_final.txt names no L0.q_proj layout";
  spit(d / "plan_final.txt", std::regex_replace(text, kKey, "w:L0.q_proj@0badf00d"));
  forge(d, "plan_final.txt");
  const Evaluation e = run(d);
  EXPECT_EQ(e.verdict(), "FAIL");
  EXPECT_TRUE(failures(e, "integrity").empty()) << all_failures(e);
  const auto f = failures(e, "plan");
  ASSERT_FALSE(f.empty()) << all_failures(e);
  EXPECT_NE(f[0].find("layout"), std::string::npos) << f[0];
}

TEST(Evaluate, ReportDisagreeingWithItsPhaseFilesFails) {
  const fs::path d = copy_of("report");
  auto j = nlohmann::json::parse(slurp(d / "report.json"));
  auto& p3 = j["phases"][3];
  ASSERT_EQ(p3["phase"], 3);
  p3["details"]["predicted_seconds"] = p3["details"]["predicted_seconds"].get<double>() * 0.5;
  spit(d / "report.json", j.dump(2));
  const Evaluation e = run(d);
  EXPECT_EQ(e.verdict(), "FAIL");
  const auto f = failures(e, "report");
  ASSERT_EQ(f.size(), 1u) << all_failures(e);
  EXPECT_NE(f[0].find("report.json phase 3: disagrees with phase3.json at /details/predicted_seconds"), std::string::npos) << f[0];
}

TEST(Evaluate, PredictedTotalThatIsNotTheSumOfItsDispatchesFails) {
  const fs::path d = copy_of("totals");
  auto j = nlohmann::json::parse(slurp(d / "phase5.json"));
  j["details"]["decode_predicted_seconds"] = j["details"]["decode_predicted_seconds"].get<double>() * 0.9;
  spit(d / "phase5.json", j.dump(2) + "\n");
  forge(d, "phase5.json");
  const Evaluation e = run(d);
  const auto f = failures(e, "totals");
  ASSERT_EQ(f.size(), 1u) << all_failures(e);
  EXPECT_NE(f[0].find("phase5.json decode_predicted_seconds"), std::string::npos) << f[0];
}

TEST(ReportHtml, SelfContainedAndWellFormed) {
  const fs::path d = copy_of("html");
  write_evaluation(d, run(d));
  const std::string html = report_html(d);
  for (const char* part : {"Gates per phase", "Per-layer cosine", "Per-dispatch timeline", "Roofline", "Shares of the bounding terms",
                           "Optimization trajectory", "Evaluation (phase 7)", "<svg"})
    EXPECT_NE(html.find(part), std::string::npos) << part;
  for (const char* banned : {"<script", "http://fonts", "https://", "<link", "<img"})
    EXPECT_EQ(html.find(banned), std::string::npos) << banned;
  // Well-formed as XML: every tag closed (the CLI test runs xmllint on it).
  int depth = 0;
  static const std::regex kTag("<(/?)([a-zA-Z][a-zA-Z0-9]*)[^>]*?(/?)>");
  for (std::sregex_iterator it(html.begin(), html.end(), kTag), end; it != end; ++it)
    depth += (*it)[1].length() ? -1 : ((*it)[3].length() ? 0 : 1);
  EXPECT_EQ(depth, 0);
}

}  // namespace
}  // namespace tessera::pipeline
