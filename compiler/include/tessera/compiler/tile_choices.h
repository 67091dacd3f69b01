#pragma once
// The decisions of the tune-tiles pass (passes.h), one per (op shape, fixed
// tile options): the option the tile search (kernels/tile_search.h) found
// fastest among those that keep the launch's layouts, the search's runner-up
// and the builder default, each with its predicted time. A DesignCache holds
// one store, so 16 identical layers search once; a deployment saves it
// (tile_choices.json) so that `run` and a resumed deploy do not search again.
//
// An entry is trusted only under what it was made with: the spec (a hash of
// its JSON) and the builder (a fingerprint of the default it builds for the
// shape, that default's predicted time and the candidates it proposes), and
// only while its chosen option still builds to the recorded time. The pass
// recomputes any other entry and counts it as stale: never trusted.
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tessera/compiler/plan.h"
#include "tessera/kernels/tile_search.h"

namespace tessera::compiler {

struct TileDecision {
  std::string spec_hash;          // spec_hash() of the spec it was made on
  std::string builder;            // builder_fingerprint() when it was made
  kernels::TileTiming chosen;     // what the launch is built with (= builder_default when kept)
  kernels::TileTiming runner_up;  // the search's second fastest (seconds 0: none)
  kernels::TileTiming builder_default;
  int64_t candidates = 0;         // distinct legal plans the search timed
  int64_t refused = 0;            // faster options refused for changing a layout
  bool tuned() const { return chosen.tiles != builder_default.tiles; }
};

class TileChoices {
 public:
  TileChoices() = default;
  TileChoices(const TileChoices& o);
  TileChoices& operator=(const TileChoices& o);

  std::optional<TileDecision> find(const std::string& key) const;
  void put(const std::string& key, TileDecision d);
  size_t size() const;

  // {"format": "tessera-tile-choices", "version": 1, "entries": [...]}, keys in order.
  nlohmann::json to_json() const;
  // InputError naming `what` and the entry for a malformed document.
  static TileChoices from_json(const nlohmann::json& j, const std::string& what);
  void save(const std::filesystem::path& file) const;
  // An absent file is an empty store; a malformed one is an InputError.
  static TileChoices load(const std::filesystem::path& file);

 private:
  mutable std::mutex mu_;
  std::map<std::string, TileDecision> entries_;
};

// "linear K=2048 M=1 N=8192 | -": the shape and the options the layout
// policy fixed for it (plan.h layout_tiles).
std::string tile_choice_key(const kernels::OpShape& shape, const kernels::TileOptions& fixed);
// 16 hex digits: FNV-1a of the spec's JSON.
std::string spec_hash(const npu::DeviceSpec& spec);
// 16 hex digits over the builder's default as built for the shape (its tiles
// and predicted seconds) and the candidate list it proposes: a builder or
// timing model that changed gives another fingerprint.
std::string builder_fingerprint(const kernels::OpShape& shape, const npu::DeviceSpec& spec,
                                const kernels::TileTiming& builder_default);

// The store's decisions behind the tuned ops of `plan` (pass_tune_tiles.cpp),
// keyed like the store, slowest chosen option first: what deploy logs.
std::vector<std::pair<std::string, TileDecision>> plan_tile_decisions(const Plan& plan,
                                                                      const DesignCache& cache);
// Those decisions as rows: op (shape), chosen / runner_up / default (tiles
// text) with their predicted *_seconds, candidates.
nlohmann::json tile_decision_rows(const Plan& plan, const DesignCache& cache);

}  // namespace tessera::compiler
