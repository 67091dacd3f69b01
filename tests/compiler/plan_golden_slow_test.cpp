// Golden plan dumps (tests/data/compiler/plan_*.txt): llama-3.2-1b and
// qwen3-0.6b cut to 2 layers, both styles, prefill S=17 and decode S=1 P=17.
// Slow label: the embedding-table and LM-head weight probes of a 128k-152k
// vocabulary pack hundreds of MB each.
//
// After an intended change to the builders, the timing model or the dump,
// regenerate them with
//   TESSERA_UPDATE_GOLDEN=1 <build>/compiler/tessera_compiler_slow_tests --gtest_filter='*PlanGolden*'
// and review the diff like code.
#include <cctype>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/compiler/plan.h"
#include "compiler_test_util.h"

namespace tessera::compiler {
namespace {

using testing_util::check_golden;
using testing_util::with_layers;

DesignCache& shared_cache() {
  static DesignCache cache(npu::DeviceSpec::preset("xdna2"));
  return cache;
}

Plan lower_style(const model::ModelConfig& c, int64_t S, int64_t P, PlanStyle style) {
  PlanOptions o;
  o.style = style;
  return lower(c, S, P, shared_cache(), o);
}

// One test per preset, both styles in it: the styles share the designs and
// the LM-head probe (one DesignCache per process, and ctest runs each test in
// its own process).
class PlanGolden : public testing::TestWithParam<const char*> {};

TEST_P(PlanGolden, PrefillAndDecodeDumps) {
  const auto c = with_layers(GetParam(), 2);
  for (PlanStyle style : {PlanStyle::per_op, PlanStyle::standard}) {
    const std::string tag = fmt::format("plan_{}_L2_{}", GetParam(), plan_style_name(style));
    const std::string pre = lower_style(c, 17, 0, style).dump();
    const std::string dec = lower_style(c, 1, 17, style).dump();
    check_golden(pre, tag + "_S17.txt");
    check_golden(dec, tag + "_S1_P17.txt");
    // The plan IR reads back byte for byte.
    EXPECT_EQ(parse_plan(pre, shared_cache()).dump(), pre) << tag;
    EXPECT_EQ(parse_plan(dec, shared_cache()).dump(), dec) << tag;
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, PlanGolden, testing::Values("llama-3.2-1b", "qwen3-0.6b"),
                         [](const testing::TestParamInfo<const char*>& p) {
                           std::string n = p.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace tessera::compiler
