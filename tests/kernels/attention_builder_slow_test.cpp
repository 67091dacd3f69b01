// The 2048- and 4096-token attention shapes of every preset build, validate and
// have a timing estimate (long programs: slow under ASan, so labelled `slow`).
#include <gtest/gtest.h>

#include "attention_builder_test_util.h"

namespace tessera::kernels {
namespace {

TEST(AttentionBuilderSlow, EveryPresetLongShapeBuildsAndValidates) {
  test::for_each_preset_shape({2048}, {2048, 4096});
}

}  // namespace
}  // namespace tessera::kernels
