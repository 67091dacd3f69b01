#include "tessera/oracle/taps.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/core/error.h"

namespace tessera::oracle {

const std::vector<std::string>& layer_tap_names() {
  static const std::vector<std::string> names = {
      "attn_norm", "q",   "k",       "v",    "q_norm", "k_norm", "q_rot", "k_rot", "attn_out",
      "o",         "h_mid", "ffn_norm", "gate", "up",    "act",    "down",  "h_out"};
  return names;
}

const std::vector<std::string>& model_tap_names() {
  static const std::vector<std::string> names = {"final_norm", "logits"};
  return names;
}

bool is_layer_tap(std::string_view name) {
  const auto& n = layer_tap_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

bool is_model_tap(std::string_view name) {
  const auto& n = model_tap_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

TapSet TapSet::all() {
  TapSet t;
  t.all_ = true;
  return t;
}

TapSet& TapSet::add(const std::string& name, int layer) {
  if (is_model_tap(name)) {
    if (layer != kAnyLayer && layer != kModelLayer)
      throw_error<UsageError>("tap '{}' is model-level (layer -1), not per layer {}", name,
                              layer);
    names_.emplace(kModelLayer, name);
    return *this;
  }
  if (!is_layer_tap(name))
    throw_error<UsageError>("unknown tap '{}' (layer taps: {}; model taps: {})", name,
                            fmt::join(layer_tap_names(), ", "),
                            fmt::join(model_tap_names(), ", "));
  if (layer < kAnyLayer || layer == kModelLayer)
    throw_error<UsageError>("tap '{}' needs a layer >= 0, got {}", name, layer);
  names_.emplace(layer, name);
  return *this;
}

bool TapSet::wants(int layer, std::string_view name) const {
  if (all_) return true;
  if (names_.empty()) return false;
  if (names_.contains(std::pair<int, std::string>(layer, std::string(name)))) return true;
  return layer >= 0 && names_.contains(std::pair<int, std::string>(kAnyLayer, std::string(name)));
}

void Taps::record(int layer, const std::string& name, const float* data, int64_t rows,
                  int64_t width) {
  auto key = std::make_pair(layer, name);
  auto it = taps_.find(key);
  int64_t old_rows = 0;
  if (it != taps_.end()) {
    TESSERA_CHECK(it->second.dim(1) == width, "tap ({}, {}) width {} then {}", layer, name,
                  it->second.dim(1), width);
    old_rows = it->second.dim(0);
  }
  Tensor grown(DType::f32, {old_rows + rows, width});
  auto dst = grown.as_mut<float>();
  if (old_rows > 0) std::memcpy(dst.data(), it->second.bytes(), it->second.nbytes());
  std::memcpy(dst.data() + old_rows * width, data, static_cast<size_t>(rows * width) * 4);
  taps_.insert_or_assign(std::move(key), std::move(grown));
}

bool Taps::contains(int layer, std::string_view name) const {
  return taps_.contains(std::pair<int, std::string>(layer, std::string(name)));
}

const Tensor& Taps::get(int layer, std::string_view name) const {
  auto it = taps_.find(std::pair<int, std::string>(layer, std::string(name)));
  if (it == taps_.end()) {
    std::vector<std::string> have;
    for (const auto& [k, t] : taps_) have.push_back(fmt::format("({}, {})", k.first, k.second));
    throw_error<InputError>("tap ({}, {}) was not recorded (recorded: {})", layer, name,
                            have.empty() ? std::string("none") : fmt::format("{}", fmt::join(have, " ")));
  }
  return it->second;
}

std::vector<std::pair<int, std::string>> Taps::keys() const {
  std::vector<std::pair<int, std::string>> k;
  for (const auto& [key, t] : taps_) k.push_back(key);
  return k;
}

}  // namespace tessera::oracle
