// Tile search over the builder's candidates with the static timing model
// (kernels/tile_search.h).
#include "tessera/kernels/tile_search.h"

#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/core/threads.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/npu/timing.h"

namespace tessera::kernels {
namespace {

// Builds and times one option set (the builder's errors propagate).
TileTiming time_option(const OpBuilder& b, const OpShape& shape, const npu::DeviceSpec& spec,
                       const TileOptions& tiles) {
  BuiltOp built = b.build(shape, spec, tiles);
  const npu::DispatchTiming t = npu::estimate_time(built.design, spec);
  return {built.tiles, t.total_seconds, t.bound};
}

// The default (item 0: it must build, and its error is the caller's to see)
// and every candidate are built and timed on whichever thread is free, then
// taken in candidate order: a new prompt length's prefill shapes are searched
// when its plan is lowered, on the way to its first token (on one thread the
// search was 284 of the 326 ms that lowering took for a 15-token SmolLM2
// prompt).
TileChoice run_search(const OpShape& shape, const npu::DeviceSpec& spec, const TileOptions& fixed) {
  const OpBuilder& b = op_builder(shape.op);
  ensure_tile_kernels_registered();
  std::vector<TileOptions> cands = b.tile_candidates(shape, spec);
  for (TileOptions& cand : cands)
    for (const auto& [k, v] : fixed) cand[k] = v;
  std::vector<std::optional<TileTiming>> built(cands.size() + 1);
  parallel_for_each(built.size(), [&](size_t i) {
    if (i == 0) {
      built[0] = time_option(b, shape, spec, fixed);
      return;
    }
    // A LimitError (DesignError, from validation, is one too): the option
    // does not fit this spec, so it is not a legal one.
    try {
      built[i] = time_option(b, shape, spec, cands[i - 1]);
    } catch (const LimitError&) {
    }
  });
  TileChoice choice;
  choice.builder_default = *built[0];
  std::map<TileOptions, double> seen = {{choice.builder_default.tiles, 0}};
  std::vector<TileTiming> timed = {choice.builder_default};
  for (size_t i = 1; i < built.size(); ++i)
    if (built[i] && seen.emplace(built[i]->tiles, 0).second) timed.push_back(std::move(*built[i]));
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
