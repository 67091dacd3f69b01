#include "tessera/runtime/session.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime_fixture.h"
#include "tessera/core/error.h"
#include "tessera/runtime/profile.h"

namespace tessera::runtime {
namespace {

using testing::TinyModel;

TEST(Session, RejectsBadInput) {
  const TinyModel& m = testing::tiny("tiny");
  Session s = testing::make_session(m);
  EXPECT_THROW(s.prefill({}), UsageError);
  const std::vector<int32_t> bad = {1, static_cast<int32_t>(m.config.vocab_size)};
  EXPECT_THROW(s.prefill(bad), InputError);
  EXPECT_THROW(s.decode(-1), InputError);
  EXPECT_EQ(s.position(), 0);
  EXPECT_THROW(parse_bucket_policy("pow3"), UsageError);
  EXPECT_EQ(parse_bucket_policy("pow2"), BucketPolicy::pow2);
  EXPECT_EQ(bucket_length(BucketPolicy::pow2, 17, 4096), 32);
  EXPECT_EQ(bucket_length(BucketPolicy::pow2, 3, 4096), 16);
  EXPECT_EQ(bucket_length(BucketPolicy::exact, 17, 4096), 17);
  // Packed weights that lack the plans' layouts are refused at construction.
  auto empty = std::make_shared<compiler::PackedWeights>();
  EXPECT_THROW(Session(m.config, empty, m.spec), InputError);
}

// The profile's rows account for every decode call's host time: the ops'
// steps, the plan and the rest add up to the mean call, and the ops' predicted
// times to the mean predicted time.
TEST(Session, DecodeProfileAddsUpToTheCalls) {
  const TinyModel& m = testing::tiny("tiny");
  SessionOptions o;
  o.profile = true;
  Session s = testing::make_session(m, o);
  const GenerateResult r = s.generate(std::vector<int32_t>{1, 2, 3}, testing::greedy(4));
  ASSERT_EQ(r.decode.size(), 3u);
  const std::vector<OpProfileRow> rows = decode_profile(r);
  double host = 0, predicted = 0, steps = 0;
  for (const auto& row : rows) {
    host += row.host_ms;
    predicted += row.predicted_ms;
    steps += row.steps_per_token;
  }
  double want_host = 0, want_predicted = 0;
  for (const auto& c : r.decode) {
    want_host += c.host_seconds * 1e3 / 3;
    want_predicted += c.predicted_seconds * 1e3 / 3;
    EXPECT_GT(c.plan_host_seconds, 0);
    EXPECT_LT(c.plan_host_seconds, c.host_seconds);
  }
  EXPECT_NEAR(host, want_host, 1e-6 * want_host);
  EXPECT_NEAR(predicted, want_predicted, 1e-6 * want_predicted);
  size_t launches = 0;
  for (const auto& step : r.decode[0].steps) launches += step.launches.size();
  EXPECT_EQ(steps, static_cast<double>(launches + r.decode[0].steps.size()));  // "dispatch" counts steps
  EXPECT_EQ(rows[rows.size() - 2].op, "plan");
  EXPECT_EQ(rows.back().op, "rest");
  for (const auto& row : rows) EXPECT_EQ(row.op.find("L0."), std::string::npos) << row.op;  // layers folded
  EXPECT_NE(format_profile(rows).find("total"), std::string::npos);
  // Without the option the calls keep no steps, and the profile says so.
  Session plain = testing::make_session(m);
  EXPECT_THROW(decode_profile(plain.generate(std::vector<int32_t>{1, 2}, testing::greedy(2))), UsageError);
}

// The first decode plan after a prompt is lowered beside the prompt, on a
// thread of its own: it must be the plan lowering at that position gives,
// and a second prompt before any decode (another position) must not leave
// the first prompt's plan in use.
TEST(Session, DecodePlanLoweredBesideThePromptIsThePlanOfItsPosition) {
  const TinyModel& m = testing::tiny("tiny");
  Session s = testing::make_session(m);
  auto direct = [&](int64_t past) {
    compiler::PlanOptions po;
    po.context = s.context();
    return compiler::lower(m.config, 1, past, *m.cache, po).dump();
  };
  s.prefill(std::vector<int32_t>{1, 2, 3});
  s.decode(4);
  EXPECT_EQ(s.last_plan().dump(), direct(3));
  Session t = testing::make_session(m);
  t.prefill(std::vector<int32_t>{1, 2, 3});
  t.prefill(std::vector<int32_t>{4, 5, 6, 7, 8});  // the plan for position 3 is dropped: T = 9 now
  t.decode(9);
  EXPECT_EQ(t.position(), 9);
  EXPECT_EQ(t.last_plan().dump(), direct(8));
}

}  // namespace
}  // namespace tessera::runtime
