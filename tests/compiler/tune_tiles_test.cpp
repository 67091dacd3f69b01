// The tune-tiles pass (passes.h) and its decision store (tile_choices.h):
// never slower than the builder default, layouts kept, one search per shape,
// and a store entry made under another spec or builder never trusted.
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/compiler/passes.h"
#include "tessera/compiler/tile_choices.h"
#include "tessera/core/error.h"
#include "compiler_test_util.h"

namespace tessera::compiler {
namespace {

// Qwen2-style, 2 layers, 1024-token vocabulary: every linear kind, cheap probes.
model::ModelConfig qwen2_two_layers() { return testing_util::small_vocab("qwen2.5-0.5b", 2); }

const std::vector<std::string> kPlain = {"place", "build", "buffers"};
const std::vector<std::string> kTuned = {"place", "build", "tune-tiles", "buffers"};

// Lowers with `passes`; the stats line of tune-tiles (if it ran) into `stats`.
Plan lower_passes(DesignCache& cache, int64_t S, int64_t P, const std::vector<std::string>& passes,
                  std::string* stats = nullptr, const std::string& bug = "") {
  Plan p = plan_header(qwen2_two_layers(), S, P, cache, {});
  run_passes(p, passes, cache, [&](const PassRecord& r, const Plan&) {
    if (stats && r.pass == "tune-tiles") *stats = r.changed;
  }, bug);
  return p;
}

DesignCache& shared_cache() {
  static DesignCache c(npu::DeviceSpec::preset("xdna2"));
  return c;
}

// The first decode linear the pass moves off its default: the planted
// entries below need a shape where the choice matters.
const Launch* first_tuned(const Plan& tuned, const Plan& plain) {
  for (size_t i = 0; i < tuned.steps.size(); ++i)
    if (tuned.steps[i].front().tiles != plain.steps[i].front().tiles) return &tuned.steps[i].front();
  return nullptr;
}

TEST(TuneTiles, NeverSlowerThanTheDefaultAndKeepsEveryLayout) {
  for (auto [S, P] : {std::pair<int64_t, int64_t>{1, 9}, {9, 0}}) {
    const Plan plain = lower_passes(shared_cache(), S, P, kPlain);
    const Plan tuned = lower_passes(shared_cache(), S, P, kTuned);
    ASSERT_EQ(plain.steps.size(), tuned.steps.size());
    int64_t moved = 0;
    for (size_t i = 0; i < plain.steps.size(); ++i) {
      const Launch& a = plain.steps[i].front();
      const Launch& b = tuned.steps[i].front();
      EXPECT_LE(b.timing->total_seconds, a.timing->total_seconds) << b.name;
      EXPECT_EQ(b.in_layouts, a.in_layouts) << b.name;
      EXPECT_EQ(b.out_layout, a.out_layout) << b.name;
      if (!a.tiles.empty()) {  // the layout policy fixed the weight layout
        EXPECT_EQ(b.weight_layouts, a.weight_layouts) << b.name;
      }
      moved += a.tiles != b.tiles;
    }
    EXPECT_LE(tuned.predicted_seconds(), plain.predicted_seconds());
    if (S == 1) {
      EXPECT_GT(moved, 0) << "no decode linear of qwen2.5-0.5b tuned: the test proves nothing";
    }
  }
}

TEST(TuneTiles, PlantedSlowestChoiceIsCaughtAgainstTheDefault) {
  DesignCache cache(npu::DeviceSpec::preset("xdna2"));
  try {
    lower_passes(cache, 1, 9, kTuned, nullptr, "tune-tiles");
    FAIL() << "the slowest option passed as a tuning";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("slower than the builder default"), std::string::npos) << e.what();
  }
  // The planted pass never writes the store: a later real run is not poisoned.
  EXPECT_EQ(cache.tile_choices().size(), 0u);
}

TEST(TuneTiles, SearchesOncePerShapeThenReusesTheStore) {
  DesignCache cache(npu::DeviceSpec::preset("xdna2"));
  std::string first, second;
  const Plan a = lower_passes(cache, 1, 9, kTuned, &first);
  std::set<std::string> shapes;
  int64_t linears = 0;
  for (const Step& s : a.steps)
    if (s.front().shape.op == "linear") shapes.insert(shape_text(s.front().shape)), ++linears;
  ASSERT_GT(linears, static_cast<int64_t>(shapes.size()));  // layers share shapes
  EXPECT_NE(first.find(fmt::format("of {} launches over {} shapes ({} searched, 0 from the store, 0 stale",
                                   linears, shapes.size(), shapes.size())), std::string::npos) << first;
  const Plan b = lower_passes(cache, 1, 9, kTuned, &second);
  EXPECT_NE(second.find(fmt::format("(0 searched, {} from the store, 0 stale", shapes.size())),
            std::string::npos) << second;
  EXPECT_EQ(a.dump(), b.dump());
}

// Entries planted in the store for the first tuned shape, each stale in its
// own way, choosing the builder default: trusted, the plan would not tune.
TEST(TuneTiles, StaleStoreEntriesAreRecomputedNeverTrusted) {
  const Plan plain = lower_passes(shared_cache(), 1, 9, kPlain);
  const Plan tuned = lower_passes(shared_cache(), 1, 9, kTuned);
  const Launch* t = first_tuned(tuned, plain);
  ASSERT_NE(t, nullptr);
  const std::string key = tile_choice_key(t->shape, layout_tiles(t->shape, shared_cache().spec()));
  const TileDecision good = *shared_cache().tile_choices().find(key);
  ASSERT_TRUE(good.tuned());

  TileDecision other_spec = good, other_builder = good, wrong_time = good;
  other_spec.spec_hash = spec_hash(npu::DeviceSpec::preset("xdna1"));
  other_spec.chosen = other_spec.builder_default;  // "keep the default" on xdna1
  other_builder.builder = "0000000000000000";
  other_builder.chosen = other_builder.builder_default;
  wrong_time.chosen.seconds *= 0.5;  // a choice recorded faster than it builds
  for (const TileDecision& planted : {other_spec, other_builder, wrong_time}) {
    DesignCache cache(npu::DeviceSpec::preset("xdna2"));
    cache.tile_choices().put(key, planted);
    std::string stats;
    const Plan p = lower_passes(cache, 1, 9, kTuned, &stats);
    EXPECT_NE(stats.find("1 stale refused"), std::string::npos) << stats;
    EXPECT_EQ(p.dump(), tuned.dump()) << "a stale entry changed the plan";
    EXPECT_EQ(cache.tile_choices().find(key)->chosen.seconds, good.chosen.seconds);
  }
}

TEST(TuneTiles, StoreRoundTripsAndRefusesMalformedFiles) {
  lower_passes(shared_cache(), 1, 9, kTuned);
  const TileChoices& s = shared_cache().tile_choices();
  ASSERT_GT(s.size(), 0u);
  const auto dir = std::filesystem::temp_directory_path() / "tessera_tune_tiles_test";
  std::filesystem::create_directories(dir);
  s.save(dir / "tc.json");
  EXPECT_EQ(TileChoices::load(dir / "tc.json").to_json(), s.to_json());
  EXPECT_EQ(TileChoices::load(dir / "absent.json").size(), 0u);
  nlohmann::json j = s.to_json();
  j["entries"][0].erase("chosen");
  std::ofstream(dir / "bad.json") << j.dump();
  EXPECT_THROW(TileChoices::load(dir / "bad.json"), InputError);
  std::ofstream(dir / "other.json") << R"({"format": "something-else", "version": 1, "entries": []})";
  EXPECT_THROW(TileChoices::load(dir / "other.json"), InputError);
  std::filesystem::remove_all(dir);
}

TEST(TuneTiles, IsSwitchable) {
  const auto on = resolve_passes(PlanStyle::standard, {}, {});
  const auto off = resolve_passes(PlanStyle::standard, {}, {"tune-tiles"});
  EXPECT_NE(std::find(on.begin(), on.end(), "tune-tiles"), on.end());
  EXPECT_EQ(std::find(off.begin(), off.end(), "tune-tiles"), off.end());
  EXPECT_EQ(off.size() + 1, on.size());
  const auto per_op = style_passes(PlanStyle::per_op);
  EXPECT_EQ(std::find(per_op.begin(), per_op.end(), "tune-tiles"), per_op.end());
}

}  // namespace
}  // namespace tessera::compiler
