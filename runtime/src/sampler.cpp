#include "tessera/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tessera/core/error.h"

namespace tessera::runtime {

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double SplitMix64::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) throw_error<InputError>("cannot pick a token from an empty logits row");
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;  // strict: the first maximum stays
  return static_cast<int32_t>(best);
}

Sampler::Sampler(const SamplingOptions& opts) : opts_(opts), rng_(opts.seed) {
  if (!std::isfinite(opts.temperature) || opts.temperature < 0)
    throw_error<UsageError>("temperature must be >= 0 (0 = greedy), got {}", opts.temperature);
  if (opts.top_k < 0) throw_error<UsageError>("top-k must be >= 0 (0 = off), got {}", opts.top_k);
  if (!(opts.top_p > 0.0 && opts.top_p <= 1.0))
    throw_error<UsageError>("top-p must be in (0, 1] (1 = off), got {}", opts.top_p);
}

namespace {
void check_logits(std::span<const float> logits) {
  if (logits.empty()) throw_error<InputError>("cannot sample from an empty logits row");
  for (size_t i = 0; i < logits.size(); ++i)
    if (std::isnan(logits[i])) throw_error<InputError>("logit {} is NaN", i);
}
}  // namespace

std::vector<std::pair<int32_t, double>> Sampler::distribution(
    std::span<const float> logits) const {
  check_logits(logits);
  if (greedy()) return {{argmax(logits), 1.0}};
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  auto before = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  size_t keep = order.size();
  if (opts_.top_k > 0 && static_cast<size_t>(opts_.top_k) < keep) {
    keep = static_cast<size_t>(opts_.top_k);
    std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(keep), order.end(),
                      before);
    order.resize(keep);
  } else {
    std::sort(order.begin(), order.end(), before);
  }
  // Softmax of logit / temperature over the survivors, in double.
  const double top = logits[static_cast<size_t>(order[0])] / opts_.temperature;
  std::vector<std::pair<int32_t, double>> dist;
  dist.reserve(keep);
  double sum = 0.0;
  for (int32_t id : order) {
    const double p = std::exp(logits[static_cast<size_t>(id)] / opts_.temperature - top);
    dist.emplace_back(id, p);
    sum += p;
  }
  for (auto& [id, p] : dist) p /= sum;
  if (opts_.top_p < 1.0) {
    // Smallest prefix whose mass reaches top_p; the token that crosses it stays.
    double cum = 0.0;
    size_t n = 0;
    while (n < dist.size() && cum < opts_.top_p) cum += dist[n++].second;
    dist.resize(std::max<size_t>(n, 1));
    for (auto& [id, p] : dist) p /= cum;
  }
  return dist;
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (greedy()) {
    check_logits(logits);
    return argmax(logits);
  }
  const auto dist = distribution(logits);
  const double u = rng_.uniform();
  double cum = 0.0;
  for (const auto& [id, p] : dist) {
    cum += p;
    if (u < cum) return id;
  }
  return dist.back().first;  // u within rounding of 1
}

}  // namespace tessera::runtime
