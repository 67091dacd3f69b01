// deployed_plan.h: generation from a deployment runs the plans its gates
// passed - the style, context and the passes phases 4 / 5 kept - and refuses
// a plan_final.txt this build does not reproduce.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <gtest/gtest.h>

#include "pipeline_test_util.h"
#include "tessera/core/error.h"
#include "tessera/model/model_dir.h"
#include "tessera/pipeline/deploy.h"
#include "tessera/pipeline/deployed_plan.h"

namespace tessera::pipeline {
namespace {

namespace fs = std::filesystem;

using test_util::scratch;

DeployOptions tiny(const fs::path& out) {
  DeployOptions o;
  o.preset = "tiny";
  o.out = out;
  o.gate_seq = 9;
  o.continuation = 6;
  o.spec = npu::DeviceSpec::preset("xdna2");
  return o;
}

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

runtime::SessionOptions options_of(const fs::path& dir) {
  const auto config = model::load_config(dir / "model/config.json");
  model::ModelConfig named = config;
  named.name = "tiny";
  compiler::DesignCache cache(npu::DeviceSpec::preset("xdna2"));
  return gated_session_options(load_deployed_plans(dir, cache), named, cache);
}

// A pass phases 4 and 5 rolled back stays out of what run executes.
TEST(DeployedPlan, RolledBackPassIsNotRunAgain) {
  DeployOptions o = tiny(scratch("rolled-back"));
  o.plant_pass_bug = "fuse";
  ASSERT_TRUE(deploy(o).passed());
  const runtime::SessionOptions so = options_of(o.out);
  EXPECT_FALSE(has(so.prefill_passes, "fuse"));
  EXPECT_FALSE(has(so.decode_passes, "fuse"));
  EXPECT_TRUE(has(so.decode_passes, "reuse-buffers"));
  EXPECT_EQ(so.style, compiler::PlanStyle::standard);

  // The passes line edited (the steps and buffers left as reuse-buffers made
  // them): it parses, but re-lowering with the claimed passes differs.
  const fs::path file = o.out / "plan_final.txt";
  std::stringstream ss;
  ss << std::ifstream(file).rdbuf();
  std::string text = ss.str();
  const size_t line = text.find("\npasses ");
  const size_t at = text.find(",reuse-buffers\n", line);
  ASSERT_TRUE(line != std::string::npos && at != std::string::npos) << text.substr(0, 300);
  text.erase(at, std::string(",reuse-buffers").size());
  std::ofstream(file, std::ios::trunc) << text;
  try {
    options_of(o.out);
    FAIL() << "an edited passes line was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is not what this build lowers"), std::string::npos) << e.what();
  }
}

// A per-op deployment runs per-op plans, not the default style; a plan edited
// to claim other passes than its steps show, or a missing one, is refused.
TEST(DeployedPlan, StyleIsTheDeploymentsAndEditedPlansAreRefused) {
  DeployOptions o = tiny(scratch("per-op"));
  o.style = compiler::PlanStyle::per_op;
  ASSERT_TRUE(deploy(o).passed());
  EXPECT_EQ(options_of(o.out).style, compiler::PlanStyle::per_op);

  const fs::path file = o.out / "plan_final.txt";
  std::stringstream ss;
  ss << std::ifstream(file).rdbuf();
  const std::string text = ss.str();
  const size_t at = text.find("style=per-op");
  ASSERT_NE(at, std::string::npos);
  std::string edited = text;
  edited.replace(at, std::string("style=per-op").size(), "style=default");
  std::ofstream(file, std::ios::trunc) << edited;
  EXPECT_THROW(options_of(o.out), InputError);

  fs::remove(file);
  try {
    options_of(o.out);
    FAIL() << "a deployment without plan_final.txt was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("plan_final.txt: missing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::pipeline
