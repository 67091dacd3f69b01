// The tune-tiles pass (passes.h): every NPU launch of an op whose builder
// proposes tile candidates is rebuilt with the option the tile search
// (kernels/tile_search.h) predicts fastest on the plan's spec, searched once
// per distinct (shape, fixed options) and remembered in the cache's decision
// store (tile_choices.h), which a deployment saves.
//
// The search runs under the options the layout policy fixed (layout_tiles:
// a prefill linear's k / n, which fix the packed weight layout every prompt
// length shares), and an option is taken only when it keeps the launch's
// activation layouts (so no edge gains a re-layout and the passes after this
// one see the same layouts) and, where the policy fixed options, its weight
// layouts. A decode GEMV (nothing fixed) may change its weight layout: its
// shape is the same at every position, so one packed copy still serves the
// session, and deploy packs it (pipeline: packed weights of the tuned plans).
//
// It runs right after build, before the passes that rebuild launches with
// layout flags of their own (kv-resident, align-layouts), so its choices do
// not depend on which of those a deployment kept: the packed weights phase 2
// writes for the plans with and without it cover every combination.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "passes_internal.h"
#include "plan_text.h"
#include "tessera/compiler/passes.h"
#include "tessera/compiler/tile_choices.h"
#include "tessera/core/error.h"

namespace tessera::compiler {

namespace {

// Ops tuned, and why the others with candidates are not: attention_prefill's
// builder already picks its blocks by the same timing model (choose_blocks;
// issue 10 found the search agrees on every preset), and its search builds
// each causal schedule at full S, seconds per shape a session would pay at
// every new prompt length.
bool tuned_op(const std::string& op) { return op == "linear"; }

struct Counts {
  int64_t launches = 0, tuned = 0, searched = 0, reused = 0, stale = 0, refused = 0;
};

// `trial` built with `tiles` keeps `base`'s activation layouts, and its
// weight layouts too when the layout policy fixed options (`pinned`).
bool keeps_layouts(const Launch& base, const Launch& trial, bool pinned) {
  return trial.in_layouts == base.in_layouts && trial.out_layout == base.out_layout &&
         (!pinned || trial.weight_layouts == base.weight_layouts);
}

// weight_keys: whether the trial's weight layouts are probed (keeps_layouts
// compares them only when pinned; the launch kept is always probed).
Launch rebuilt(const Plan& plan, const Launch& base, const kernels::TileOptions& tiles,
               DesignCache& cache, bool weight_keys = true) {
  Launch t = base;
  t.tiles = tiles;
  detail::build_launch(plan, t, cache, weight_keys);
  return t;
}

// The search's options, fastest first (ties: candidate order), down to the
// default: the first that keeps the layouts. The planted bug takes the
// slowest option timed, whatever its layouts.
TileDecision search(const Plan& plan, const Launch& base, const TileDecision& made_under,
                    DesignCache& cache, bool bug, Counts& n) {
  const kernels::TileChoice ch = kernels::search_tiles(base.shape, cache.spec(), base.tiles);
  TileDecision d = made_under;
  d.runner_up = ch.runner_up;
  d.candidates = ch.candidates;
  d.chosen = d.builder_default;
  std::vector<kernels::TileTiming> order = ch.timed;
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.seconds < b.seconds; });
  ++n.searched;
  if (bug) {
    d.chosen = order.back();
    return d;
  }
  for (const kernels::TileTiming& t : order) {
    if (t.tiles == d.builder_default.tiles || !(t.seconds < d.builder_default.seconds)) break;
    const bool pinned = !base.tiles.empty();
    if (keeps_layouts(base, rebuilt(plan, base, t.tiles, cache, pinned), pinned)) {
      d.chosen = t;
      break;
    }
    ++d.refused;
  }
  return d;
}

// The decision for `base` (built with the policy's options): the store's,
// when it was made under this spec and builder and its choice still builds
// to the recorded time, else a new search.
TileDecision decide(const Plan& plan, const Launch& base, DesignCache& cache, bool bug, Counts& n) {
  const kernels::TileTiming def{base.op->tiles, base.timing->total_seconds, base.timing->bound};
  TileDecision now{spec_hash(cache.spec()), builder_fingerprint(base.shape, cache.spec(), def), def,
                   {}, def, 0, 0};
  const std::string key = tile_choice_key(base.shape, base.tiles);
  if (bug) return search(plan, base, now, cache, true, n);  // never stored: the store stays true
  if (auto old = cache.tile_choices().find(key)) {
    bool same = old->spec_hash == now.spec_hash && old->builder == now.builder &&
                old->builder_default.tiles == def.tiles && old->builder_default.seconds == def.seconds;
    if (same && old->tuned()) {
      const bool pinned = !base.tiles.empty();
      const Launch t = rebuilt(plan, base, old->chosen.tiles, cache, pinned);
      same = t.timing->total_seconds == old->chosen.seconds && keeps_layouts(base, t, pinned);
    }
    if (same) {
      ++n.reused;
      return *old;
    }
    ++n.stale;
  }
  TileDecision d = search(plan, base, now, cache, false, n);
  cache.tile_choices().put(key, d);
  return d;
}

std::string us(double s) { return fmt::format("{:.1f}us", s * 1e6); }

}  // namespace

std::string pass_tune_tiles(Plan& plan, DesignCache& cache, bool bug) {
  Counts n;
  std::map<std::string, TileDecision> seen;  // this plan's distinct shapes
  for (Step& s : plan.steps) {
    if (s.kind != StepKind::npu) continue;
    for (Launch& l : s.launches) {
      if (!tuned_op(l.shape.op)) continue;
      ++n.launches;
      const std::string key = tile_choice_key(l.shape, l.tiles);
      auto it = seen.find(key);
      if (it == seen.end()) it = seen.emplace(key, decide(plan, l, cache, bug, n)).first;
      const TileDecision& d = it->second;
      if (!d.tuned()) continue;
      Launch t = rebuilt(plan, l, d.chosen.tiles, cache);
      // The search's promise, checked on the launch as built: never slower
      // than the builder default it replaces.
      if (t.timing->total_seconds > d.builder_default.seconds)
        throw_error<InternalError>(
            "pass 'tune-tiles': {} ({}) tuned to {} predicts {}, slower than the builder default {} at {}",
            l.name, shape_text(l.shape), kernels::tiles_text(d.chosen.tiles), us(t.timing->total_seconds),
            kernels::tiles_text(d.builder_default.tiles), us(d.builder_default.seconds));
      l = std::move(t);
      ++n.tuned;
    }
  }
  for (const auto& [k, d] : seen) n.refused += d.refused;
  std::string slowest = "none";
  const TileDecision* top = nullptr;
  for (const auto& [k, d] : seen)
    if (d.tuned() && (top == nullptr || d.chosen.seconds > top->chosen.seconds)) top = &d, slowest = k;
  if (top != nullptr)
    slowest = fmt::format("{}: {} {} (runner-up {} {}, default {})", slowest.substr(0, slowest.find(" |")),
                          kernels::tiles_text(top->chosen.tiles), us(top->chosen.seconds),
                          kernels::tiles_text(top->runner_up.tiles), us(top->runner_up.seconds),
                          us(top->builder_default.seconds));
  return fmt::format("tuned {} of {} launches over {} shapes ({} searched, {} from the store, {} stale "
                     "refused, {} faster options refused for a layout change); slowest tuned: {}",
                     n.tuned, n.launches, seen.size(), n.searched, n.reused, n.stale, n.refused, slowest);
}

// The decisions behind `plan`'s tuned launches, slowest chosen first.
std::vector<std::pair<std::string, TileDecision>> plan_tile_decisions(const Plan& plan,
                                                                      const DesignCache& cache) {
  std::map<std::string, TileDecision> by;
  for (const Step& s : plan.steps)
    for (const Launch& l : s.launches) {
      if (s.kind != StepKind::npu || !tuned_op(l.shape.op)) continue;
      // The key is the policy's options, not the tuned ones the launch now holds.
      const std::string key = tile_choice_key(l.shape, layout_tiles(l.shape, cache.spec()));
      if (auto d = cache.tile_choices().find(key)) by.emplace(key, *d);
    }
  std::vector<std::pair<std::string, TileDecision>> out(by.begin(), by.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second.chosen.seconds > b.second.chosen.seconds; });
  return out;
}

}  // namespace tessera::compiler
