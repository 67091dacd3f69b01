#pragma once
// Token sampling over a logits row: greedy, temperature, top-k, top-p (nucleus),
// in the order Hugging Face generate applies them (temperature, then top-k,
// then top-p on the renormalised survivors). Random draws come from SplitMix64
// and are turned into probabilities by our own arithmetic, never by a
// std::*_distribution (whose output is implementation-defined), so a seed gives
// the same tokens on every platform and standard library.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace tessera::runtime {

// SplitMix64 (Steele, Lea, Flood 2014): tiny, fully specified, and good enough
// for picking tokens.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();  // [0, 1) with 53 random bits
 private:
  uint64_t state_;
};

struct SamplingOptions {
  double temperature = 0.0;  // 0 = greedy (argmax)
  int64_t top_k = 0;         // 0 = no limit
  double top_p = 1.0;        // 1 = no nucleus cut
  uint64_t seed = 0;
};

// Index of the largest logit; the lowest index wins a tie.
int32_t argmax(std::span<const float> logits);

class Sampler {
 public:
  // Throws UsageError for temperature < 0 or not finite, top_k < 0,
  // top_p outside (0, 1].
  explicit Sampler(const SamplingOptions& opts);

  bool greedy() const { return opts_.temperature == 0.0; }
  // Throws InputError if logits are empty or contain NaN.
  int32_t sample(std::span<const float> logits);
  // The distribution sample() draws from: (token, probability) pairs after
  // temperature, top-k and top-p, renormalised, in descending probability
  // (ties by lower token id). Greedy: the argmax with probability 1.
  std::vector<std::pair<int32_t, double>> distribution(std::span<const float> logits) const;

 private:
  SamplingOptions opts_;
  SplitMix64 rng_;
};

}  // namespace tessera::runtime
