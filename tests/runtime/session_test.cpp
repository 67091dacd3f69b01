#include "tessera/runtime/session.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime_fixture.h"
#include "tessera/core/error.h"

namespace tessera::runtime {
namespace {

using testing::TinyModel;

TEST(Session, RejectsBadInput) {
  const TinyModel& m = testing::tiny("tiny");
  Session s = testing::make_session(m);
  EXPECT_THROW(s.prefill({}), UsageError);
  const std::vector<int32_t> bad = {1, static_cast<int32_t>(m.config.vocab_size)};
  EXPECT_THROW(s.prefill(bad), InputError);
  EXPECT_THROW(s.decode(-1), InputError);
  EXPECT_EQ(s.position(), 0);
  EXPECT_THROW(parse_bucket_policy("pow3"), UsageError);
  EXPECT_EQ(parse_bucket_policy("pow2"), BucketPolicy::pow2);
  EXPECT_EQ(bucket_length(BucketPolicy::pow2, 17, 4096), 32);
  EXPECT_EQ(bucket_length(BucketPolicy::pow2, 3, 4096), 16);
  EXPECT_EQ(bucket_length(BucketPolicy::exact, 17, 4096), 17);
  // Packed weights that lack the plans' layouts are refused at construction.
  auto empty = std::make_shared<compiler::PackedWeights>();
  EXPECT_THROW(Session(m.config, empty, m.spec), InputError);
}

}  // namespace
}  // namespace tessera::runtime
