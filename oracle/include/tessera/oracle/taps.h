#pragma once
// Named intermediates of the oracle forward (DESIGN.md "The oracle is the
// judge"). A tap is addressed by (layer, name); model-level taps (final_norm,
// logits) use layer -1. A TapSet says which taps to record so that the fast
// path (TapSet::none()) records nothing and allocates nothing for them.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::oracle {

inline constexpr int kModelLayer = -1;

// Per-layer tap names in forward order; q_norm / k_norm exist only for
// qk-norm models (Qwen3).
const std::vector<std::string>& layer_tap_names();
// Model-level tap names (layer -1): final_norm, logits.
const std::vector<std::string>& model_tap_names();
bool is_layer_tap(std::string_view name);
bool is_model_tap(std::string_view name);

class TapSet {
 public:
  static TapSet none() { return TapSet(); }
  static TapSet all();
  // Record `name` at `layer` (or at every layer when layer is nullopt-like -2).
  // Throws UsageError naming an unknown tap and listing the known ones.
  TapSet& add(const std::string& name, int layer = kAnyLayer);
  bool wants(int layer, std::string_view name) const;
  bool empty() const { return !all_ && names_.empty(); }

  static constexpr int kAnyLayer = -2;

 private:
  bool all_ = false;
  std::set<std::pair<int, std::string>, std::less<>> names_;
};

// Recorded taps: each is an F32 tensor [tokens, width]. Recording the same tap
// again (a decode step after a prefill) appends rows, so a whole generation
// can be compared position by position.
class Taps {
 public:
  void record(int layer, const std::string& name, const float* data, int64_t rows,
              int64_t width);
  bool contains(int layer, std::string_view name) const;
  // Throws InputError naming the tap and listing what was recorded.
  const Tensor& get(int layer, std::string_view name) const;
  std::vector<std::pair<int, std::string>> keys() const;
  void clear() { taps_.clear(); }

 private:
  std::map<std::pair<int, std::string>, Tensor, std::less<>> taps_;
};

}  // namespace tessera::oracle
