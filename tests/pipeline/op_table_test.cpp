// The table of operators (op_table.h): one row per op, every op a builder
// can lower has one, and the readers (reference_ops.h, thresholds.h) see
// exactly the table.
#include <set>

#include <gtest/gtest.h>

#include "tessera/core/error.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/pipeline/op_table.h"
#include "tessera/pipeline/reference_ops.h"
#include "tessera/pipeline/thresholds.h"

namespace tessera::pipeline {
namespace {

TEST(OpTable, OneRowPerOpAndEveryBuilderOpHasOne) {
  std::set<std::string> seen;
  for (const OpDef& d : op_table()) {
    EXPECT_TRUE(seen.insert(d.op()).second) << "two rows for " << d.op();
    EXPECT_NE(d.sizes, nullptr) << d.op();
    EXPECT_NE(d.reference, nullptr) << d.op();
    EXPECT_FALSE(d.threshold.reason.empty()) << d.op();
  }
  for (const std::string& op : kernels::op_names()) EXPECT_NE(find_op(op), nullptr) << op;
  EXPECT_EQ(find_op("no_such_op"), nullptr);
  ASSERT_EQ(kernel_thresholds().size(), op_table().size());
  for (size_t i = 0; i < op_table().size(); ++i) EXPECT_EQ(kernel_thresholds()[i].op, op_table()[i].op());
}

TEST(OpTable, ReadersRefuseAnOpWithoutARow) {
  kernels::OpShape s{"no_such_op", {{"M", 1}}, {}};
  EXPECT_THROW(reference_input_sizes(s), UsageError);
  EXPECT_THROW(reference_op(s, {}), UsageError);
  EXPECT_THROW(kernel_threshold(s), InternalError);
}

// The linear row's shape terms: the fp32 accumulation bound grows with K.
TEST(OpTable, LinearThresholdGrowsWithTheReduction) {
  const Threshold small = kernel_threshold({"linear", {{"M", 1}, {"K", 64}, {"N", 8}}, {}});
  const Threshold large = kernel_threshold({"linear", {{"M", 1}, {"K", 8192}, {"N", 8}}, {}});
  EXPECT_NEAR(large.max_rel - small.max_rel, (8192 - 64) * std::ldexp(1.0, -24), 1e-15);
  EXPECT_GT(large.noise.row_roundings, small.noise.row_roundings);
}

}  // namespace
}  // namespace tessera::pipeline
