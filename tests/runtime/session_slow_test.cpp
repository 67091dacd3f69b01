// Multi-token generation on the tiny presets: a few hundred simulated
// dispatches each, so they run in the `slow` label (skipped under ASan).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime_fixture.h"
#include "tessera/runtime/session.h"

namespace tessera::runtime {
namespace {

using testing::kU;
using testing::TinyModel;

class SessionSlow : public ::testing::TestWithParam<std::string> {};

// Greedy on the NPU follows the oracle's greedy for 12 tokens. While the two
// agree their contexts are identical, so every step is compared. A different
// pick is accepted only where the oracle's own top-2 gap is within the bf16
// margin (the NPU's pick is then as right as the oracle's); the continuations
// differ from there on, so the comparison stops. Margin: the logits' normwise
// error measured by the executor test is <= 2.3u (bound 3u sqrt(depth)); a
// flip needs top-1 and top-2 to move towards each other, so 2 * 4u * max
// |logit| covers it. At least 6 steps must be compared for the test to mean
// anything (measured: all 12 agree on both presets; smallest oracle gap
// 1.4u * max |logit|, tiny-qwen3 step 7).
TEST_P(SessionSlow, GreedyContinuationMatchesOracle) {
  const TinyModel& m = testing::tiny(GetParam());
  const auto prompt = testing::prompt_tokens(5, m.config.vocab_size);
  const auto ref = testing::oracle_greedy(m, prompt, 12);
  Session s = testing::make_session(m);
  const GenerateResult r = s.generate(prompt, testing::greedy(12));
  ASSERT_EQ(r.tokens.size(), 12u);
  EXPECT_EQ(r.stop, StopReason::max_tokens);
  size_t compared = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    ++compared;
    if (r.tokens[i] == ref[i].token) continue;
    EXPECT_LT(ref[i].gap, 8 * kU * ref[i].scale)
        << "step " << i << ": NPU picked " << r.tokens[i] << ", oracle " << ref[i].token
        << " with a clear gap " << ref[i].gap;
    break;
  }
  EXPECT_GE(compared, 6u) << "the continuations split too early to prove anything";
  EXPECT_EQ(s.position(), 5 + 11);
  EXPECT_EQ(r.decode.size(), 11u);
  EXPECT_GT(r.prefill.predicted_seconds, 0);
  EXPECT_GT(r.decode_predicted_seconds_per_token(), 0);
}

// pow2 pads the 5-token prompt to 16 rows; the 12-token greedy continuation
// must be the exact bucket's (pad rows' K/V never enter the session cache).
TEST_P(SessionSlow, Pow2BucketGeneratesAsExact) {
  const TinyModel& m = testing::tiny(GetParam());
  const auto prompt = testing::prompt_tokens(5, m.config.vocab_size, 2);
  SessionOptions po;
  po.bucket = BucketPolicy::pow2;
  Session exact = testing::make_session(m), pow2 = testing::make_session(m, po);
  const auto re = exact.generate(prompt, testing::greedy(12));
  const auto rp = pow2.generate(prompt, testing::greedy(12));
  EXPECT_EQ(rp.prefill.compiled_tokens, 16);
  EXPECT_EQ(re.tokens, rp.tokens);
}

INSTANTIATE_TEST_SUITE_P(Tiny, SessionSlow, ::testing::Values("tiny", "tiny-qwen3"));

TEST(SessionSlow, SamplingIsDeterministicPerSeed) {
  const TinyModel& m = testing::tiny("tiny");
  const auto prompt = testing::prompt_tokens(4, m.config.vocab_size);
  GenerateOptions g = testing::greedy(6);
  g.sampling.temperature = 1.5;
  g.sampling.top_k = 50;
  g.sampling.top_p = 0.95;
  g.sampling.seed = 1234;
  Session s = testing::make_session(m);
  const auto a = s.generate(prompt, g).tokens;
  s.reset();
  const auto b = s.generate(prompt, g).tokens;
  EXPECT_EQ(a, b);
  s.reset();
  const auto greedy_tokens = s.generate(prompt, testing::greedy(6)).tokens;
  // With a flat temperature-1.5 distribution over 50 candidates, 6 draws all
  // equal to the greedy picks would mean the sampler is not sampling.
  EXPECT_NE(a, greedy_tokens);
}

}  // namespace
}  // namespace tessera::runtime
