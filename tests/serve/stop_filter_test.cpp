#include "tessera/serve/stop_filter.h"

#include <gtest/gtest.h>

namespace tessera::serve {
namespace {

TEST(StopFilter, PassesTextThroughWithoutStops) {
  StopFilter f({});
  EXPECT_EQ(f.push("Hello"), "Hello");
  EXPECT_EQ(f.push(" world"), " world");
  EXPECT_EQ(f.finish(), "");
  EXPECT_FALSE(f.stopped());
}

TEST(StopFilter, CutsAtAStopSplitAcrossPieces) {
  StopFilter f({"\nUser:"});
  EXPECT_EQ(f.push("Paris.\nUs"), "Paris.");  // "\nUs" could start the stop: held
  EXPECT_FALSE(f.stopped());
  EXPECT_EQ(f.push("er: next"), "");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.text(), "Paris.");
  EXPECT_EQ(f.push("more"), "");
  EXPECT_EQ(f.finish(), "");
}

TEST(StopFilter, ReleasesAHeldTailThatDidNotBecomeAStop) {
  StopFilter f({"END"});
  EXPECT_EQ(f.push("THE E"), "THE ");
  EXPECT_EQ(f.push("N"), "");
  EXPECT_EQ(f.push("D"), "");
  EXPECT_TRUE(f.stopped());
  StopFilter g({"END"});
  EXPECT_EQ(g.push("THE EN"), "THE ");
  EXPECT_EQ(g.push("ough"), "ENough");
  EXPECT_EQ(g.push("E"), "");
  EXPECT_EQ(g.finish(), "E");  // generation ended: nothing is held back
  EXPECT_EQ(g.text(), "THE ENoughE");
}

TEST(StopFilter, TheEarliestOfSeveralStopsWins) {
  StopFilter f({"b", "a"});
  EXPECT_EQ(f.push("xxbyya"), "xx");
  EXPECT_TRUE(f.stopped());
}

}  // namespace
}  // namespace tessera::serve
