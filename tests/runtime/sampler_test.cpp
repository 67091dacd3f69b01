#include "tessera/runtime/sampler.h"

#include <cmath>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/error.h"

namespace tessera::runtime {
namespace {

std::vector<float> log_probs(const std::vector<double>& p) {
  std::vector<float> l;
  for (double v : p) l.push_back(static_cast<float>(std::log(v)));
  return l;
}

// Empirical frequency of each token over n draws.
std::map<int32_t, double> frequencies(Sampler& s, const std::vector<float>& logits, int n) {
  std::map<int32_t, double> f;
  for (int i = 0; i < n; ++i) f[s.sample(logits)] += 1.0 / n;
  return f;
}

// Each frequency within 5 binomial standard deviations of its expectation, and
// no token outside `expected` ever drawn.
void expect_matches(const std::map<int32_t, double>& freq, const std::map<int32_t, double>& expected,
                    int n) {
  for (const auto& [id, f] : freq) EXPECT_TRUE(expected.contains(id)) << "drew token " << id;
  for (const auto& [id, p] : expected) {
    const double got = freq.contains(id) ? freq.at(id) : 0.0;
    const double sigma = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(got, p, 5 * sigma + 1e-12) << "token " << id;
  }
}

TEST(SplitMix64, MatchesReferenceSequence) {
  // Published SplitMix64 outputs for seed 1234567 (the algorithm's reference
  // C code); they pin the generator so seeds mean the same on every platform.
  SplitMix64 r(1234567);
  EXPECT_EQ(r.next(), 6457827717110365317ull);
  EXPECT_EQ(r.next(), 3203168211198807973ull);
  EXPECT_EQ(r.next(), 9817491932198370423ull);
  EXPECT_EQ(r.next(), 4593380528125082431ull);
  EXPECT_EQ(r.next(), 16408922859458223821ull);
}

TEST(SplitMix64, UniformInUnitInterval) {
  SplitMix64 r(7);
  double lo = 1, hi = 0, sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const double u = r.uniform();
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum += u;
  }
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
}

TEST(Sampler, GreedyPicksFirstMaximum) {
  Sampler s({});
  EXPECT_TRUE(s.greedy());
  EXPECT_EQ(s.sample(std::vector<float>{0.f, 3.f, -1.f, 3.f}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{-5.f, -4.f, -6.f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{2.f}), 0);
}

TEST(Sampler, TemperatureOneFollowsSoftmax) {
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  Sampler s({.temperature = 1.0, .seed = 42});
  const int n = 100000;
  expect_matches(frequencies(s, log_probs(p), n), {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}}, n);
}

TEST(Sampler, TemperatureSharpens) {
  // logits log p at temperature 0.5 give probabilities proportional to p^2.
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  Sampler s({.temperature = 0.5, .seed = 3});
  const int n = 100000;
  const double z = 0.01 + 0.04 + 0.09 + 0.16;
  expect_matches(frequencies(s, log_probs(p), n),
                 {{0, 0.01 / z}, {1, 0.04 / z}, {2, 0.09 / z}, {3, 0.16 / z}}, n);
}

TEST(Sampler, TopKKeepsTheKLargest) {
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  Sampler s({.temperature = 1.0, .top_k = 2, .seed = 5});
  const int n = 50000;
  expect_matches(frequencies(s, log_probs(p), n), {{2, 0.3 / 0.7}, {3, 0.4 / 0.7}}, n);
}

TEST(Sampler, TopPKeepsTheSmallestSufficientPrefix) {
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  const int n = 50000;
  // 0.4 < 0.65 <= 0.4 + 0.3: the crossing token stays.
  Sampler s({.temperature = 1.0, .top_p = 0.65, .seed = 9});
  expect_matches(frequencies(s, log_probs(p), n), {{2, 0.3 / 0.7}, {3, 0.4 / 0.7}}, n);
  Sampler one({.temperature = 1.0, .top_p = 0.35, .seed = 9});
  expect_matches(frequencies(one, log_probs(p), 1000), {{3, 1.0}}, 1000);
  Sampler three({.temperature = 1.0, .top_p = 0.75, .seed = 9});
  const auto d = three.distribution(log_probs(p));
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].first, 3);
  EXPECT_EQ(d[2].first, 1);
  EXPECT_NEAR(d[2].second, 0.2 / 0.9, 1e-6);
}

TEST(Sampler, TopPAppliesAfterTopKRenormalises) {
  // top_k = 2 leaves {0.3, 0.4} -> {3/7, 4/7}; top_p 0.5 then keeps only 4/7.
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  Sampler s({.temperature = 1.0, .top_k = 2, .top_p = 0.5, .seed = 1});
  const auto d = s.distribution(log_probs(p));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].first, 3);
  EXPECT_DOUBLE_EQ(d[0].second, 1.0);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(std::sin(i * 1.7));
  auto draw = [&](uint64_t seed) {
    Sampler s({.temperature = 1.0, .seed = seed});
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.sample(logits));
    return out;
  };
  EXPECT_EQ(draw(11), draw(11));
  EXPECT_NE(draw(11), draw(12));
}

TEST(Sampler, RejectsBadOptionsAndLogits) {
  EXPECT_THROW(Sampler({.temperature = -1.0}), UsageError);
  EXPECT_THROW(Sampler({.temperature = NAN}), UsageError);
  EXPECT_THROW(Sampler({.top_k = -1}), UsageError);
  EXPECT_THROW(Sampler({.top_p = 0.0}), UsageError);
  EXPECT_THROW(Sampler({.top_p = 1.5}), UsageError);
  Sampler s({.temperature = 1.0});
  EXPECT_THROW(s.sample(std::vector<float>{}), InputError);
  EXPECT_THROW(s.sample(std::vector<float>{1.f, NAN}), InputError);
}

}  // namespace
}  // namespace tessera::runtime
