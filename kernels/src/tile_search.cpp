// Tile search over the builder's candidates with the static timing model
// (kernels/tile_search.h).
#include "tessera/kernels/tile_search.h"

#include <map>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/npu/timing.h"

namespace tessera::kernels {
namespace {

// Builds and times one option set; false when the builder refuses it.
bool time_option(const OpBuilder& b, const OpShape& shape, const npu::DeviceSpec& spec,
                 const TileOptions& tiles, TileTiming& out) {
  try {
    BuiltOp built = b.build(shape, spec, tiles);
    const npu::DispatchTiming t = npu::estimate_time(built.design, spec);
    out = {built.tiles, t.total_seconds, t.bound};
    return true;
  } catch (const LimitError&) {  // DesignError (validation) is one too
    return false;                  // does not fit this spec: not a legal option
  }
}

TileChoice run_search(const OpShape& shape, const npu::DeviceSpec& spec, const TileOptions& fixed) {
  const OpBuilder& b = op_builder(shape.op);
  ensure_tile_kernels_registered();
  TileChoice choice;
  {
    // The default must build: its error is the caller's to see.
    BuiltOp built = b.build(shape, spec, fixed);
    const npu::DispatchTiming t = npu::estimate_time(built.design, spec);
    choice.builder_default = {built.tiles, t.total_seconds, t.bound};
  }
  std::map<TileOptions, double> seen = {{choice.builder_default.tiles, 0}};
  std::vector<TileTiming> timed = {choice.builder_default};
  for (TileOptions cand : b.tile_candidates(shape, spec)) {
    for (const auto& [k, v] : fixed) cand[k] = v;
    TileTiming t;
    if (!time_option(b, shape, spec, cand, t) || !seen.emplace(t.tiles, 0).second) continue;
    timed.push_back(std::move(t));
  }
  choice.candidates = static_cast<int64_t>(timed.size());
  size_t best = 0;
  for (size_t i = 1; i < timed.size(); ++i)
    if (timed[i].seconds < timed[best].seconds) best = i;
  choice.best = timed[best];
  bool any = false;
  for (size_t i = 0; i < timed.size(); ++i) {
    if (i == best) continue;
    if (!any || timed[i].seconds < choice.runner_up.seconds) choice.runner_up = timed[i];
    any = true;
  }
  choice.timed = std::move(timed);
  return choice;
}

}  // namespace

std::string tiles_text(const TileOptions& t) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : t) parts.push_back(fmt::format("{}={}", k, v));
  return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, " "));
}

TileChoice search_tiles(const OpShape& shape, const npu::DeviceSpec& spec,
                        const TileOptions& fixed) {
  static std::mutex mu;
  static std::map<std::string, TileChoice> cache;
  const std::string key =
      fmt::format("{}\n{}\n{}", spec.to_json().dump(), shape.key(), tiles_text(fixed));
  {
    std::lock_guard lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  TileChoice c = run_search(shape, spec, fixed);
  std::lock_guard lock(mu);
  return cache.emplace(key, std::move(c)).first->second;
}

}  // namespace tessera::kernels
