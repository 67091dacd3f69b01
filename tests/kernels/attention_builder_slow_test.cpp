// The 2048- and 4096-token attention shapes of every preset build, validate and
// have a timing estimate, and the tile search explores a 2048-token prefill
// (long programs: slow under ASan, so labelled `slow`).
#include <gtest/gtest.h>

#include "attention_builder_test_util.h"
#include "tessera/kernels/tile_search.h"
#include "tessera/npu/timing.h"

namespace tessera::kernels {
namespace {

TEST(AttentionBuilderSlow, EveryPresetLongShapeBuildsAndValidates) {
  test::for_each_preset_shape({2048}, {2048, 4096});
}

TEST(TileSearch, AttentionPrefillBlocksAreSearched) {
  const auto spec = npu::DeviceSpec::preset("xdna2");
  const OpShape s{"attention_prefill",
                  {{"S", 2048}, {"P", 0}, {"heads", 32}, {"kv_heads", 8}, {"head_dim", 64}},
                  {{"scale", 0.125}}};
  const TileChoice c = search_tiles(s, spec);
  EXPECT_GT(c.candidates, 5);
  EXPECT_LE(c.best.seconds, c.builder_default.seconds);
  EXPECT_NE(c.best.bound, "stream");
  EXPECT_NE(c.best.bound, "ddr");
}

}  // namespace
}  // namespace tessera::kernels
