#include "tessera/npu/validator.h"

#include <functional>

#include <gtest/gtest.h>

#include "npu_a_fixtures.h"
#include "tessera/npu/allocator.h"

namespace tessera::npu {
namespace {

using namespace build;
using testing::passthrough_design;
using testing::test_kernels;

const DeviceSpec& xdna2() {
  static const DeviceSpec s = DeviceSpec::preset("xdna2-sourced");
  return s;
}

void check(const Design& d) { validate(d, xdna2(), test_kernels()); }

TEST(Validator, ValidDesignsPass) {
  EXPECT_NO_THROW(check(passthrough_design()));
  EXPECT_NO_THROW(check(passthrough_design(8, 4096, "t_add_one")));
}

// validate() returns the layout it checked, launch by launch: the one
// layout_launch() gives (Simulator::prepare runs on it).
TEST(Validator, ReturnsEachLaunchsLayout) {
  const Design d = passthrough_design(8, 4096, "t_add_one");
  const std::vector<LaunchLayout> got = validate(d, xdna2(), test_kernels());
  ASSERT_EQ(got.size(), d.launches.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const LaunchLayout want = layout_launch(d.launches[i], xdna2());
    EXPECT_EQ(got[i].endpoint_pool, want.endpoint_pool);
    EXPECT_EQ(got[i].buffer_address, want.buffer_address);
    EXPECT_EQ(got[i].bds, want.bds);
    ASSERT_EQ(got[i].pools.size(), want.pools.size());
    for (size_t p = 0; p < want.pools.size(); ++p) {
      EXPECT_EQ(got[i].pools[p].name, want.pools[p].name);
      EXPECT_EQ(got[i].pools[p].address, want.pools[p].address);
    }
    ASSERT_EQ(got[i].memory.size(), want.memory.size());
    for (const auto& [tile, m] : want.memory) EXPECT_EQ(got[i].memory.at(tile).used(), m.used());
  }
}

TEST(Validator, InvalidSpecIsRejectedFirst) {
  DeviceSpec s = xdna2();
  s.clock_hz = 3e9;
  EXPECT_THROW(validate(passthrough_design(), s, test_kernels()), DeviceSpecError);
}

// One case per rule: a valid design with exactly one thing broken, and the
// words the error must contain (tile, object and limit).
struct Case {
  const char* name;
  std::function<void(Design&)> mutate;
  std::vector<const char*> expect;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

Launch& L(Design& d) { return d.launches[0]; }
Fifo& F(Design& d, const char* name) {
  for (auto& f : L(d).fifos)
    if (f.name == name) return f;
  throw std::runtime_error("no fifo");
}
std::vector<CoreOp>& body(Design& d) { return L(d).cores[0].program[0].body; }

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"HostBufferElemBytes", [](Design& d) { d.host_buffers[0].elem_bytes = 3; }, {"host buffer 'in'", "elem_bytes 3"}},
      {"HostBufferTwice", [](Design& d) { d.host_buffers[1].name = "in"; }, {"'in' declared twice"}},
      {"TileOffGrid", [](Design& d) { F(d, "in_l1").consumers[0] = {9, 2}; },
       {"fifo 'in_l1' consumer", "(9,2)", "8 x 6 grid"}},
      {"FifoNameTwice", [](Design& d) { F(d, "out_l2").name = "in_l2"; }, {"fifo name 'in_l2'", "used twice"}},
      {"BufferNamedLikeFifo", [](Design& d) { L(d).buffers = {{"in_l1", {0, 2}, 64, -1}}; },
       {"buffer 'in_l1'", "name of a fifo"}},
      {"CoreOnMemTile", [](Design& d) { L(d).cores[0].tile = {0, 1}; }, {"mem tile (0,1)", "only on compute tiles"}},
      {"TwoCoresOnOneTile", [](Design& d) { L(d).cores.push_back(L(d).cores[0]); }, {"tile (0,2) has two core programs"}},
      {"LinkOnComputeTile", [](Design& d) { L(d).links[0].tile = {0, 2}; }, {"link placed on compute tile (0,2)"}},
      {"BufferOnShim", [](Design& d) { L(d).buffers = {{"acc", {0, 0}, 64, -1}}; }, {"buffer 'acc'", "shim tile (0,0)"}},
      {"FifoWithoutConsumer", [](Design& d) { F(d, "out_l2").consumers.clear(); }, {"fifo 'out_l2'", "no consumer"}},
      {"FifoDepthZero", [](Design& d) { F(d, "in_l1").depth = 0; }, {"fifo 'in_l1'", "depth 0"}},
      {"ObjectNotWordMultiple", [](Design& d) { F(d, "in_l1").object_bytes = 254; }, {"fifo 'in_l1'", "object_bytes 254"}},
      {"ConsumerPatternCount", [](Design& d) { F(d, "in_l1").consumer_patterns = {{}, {}}; },
       {"fifo 'in_l1'", "2 consumer_patterns for 1 consumers"}},
      {"PatternOnShimProducer", [](Design& d) { F(d, "in_l2").producer_pattern = pattern({{128, 1}}); },
       {"fifo 'in_l2'", "producer_pattern on a shim producer"}},
      {"TwoShimConsumers", [](Design& d) { F(d, "out_l2").consumers.push_back({1, 0}); }, {"2 shim consumers (limit 1)"}},
      {"StreamLengthMismatch", [](Design& d) { F(d, "in_l1").consumer_patterns = {pattern({{64, 1}})}; },
       {"fifo 'in_l1' consumer (0,2) writes 128 bytes", "streams 256"}},
      {"InnermostStrideBf16", [](Design& d) { F(d, "in_l1").consumer_patterns = {pattern({{64, 1}, {2, 2}})}; },
       {"fifo 'in_l1' consumer pattern at (0,2)", "innermost stride 2", "2-byte elements"}},
      {"TooManyDimsOnCompute",
       [](Design& d) { F(d, "in_l1").consumer_patterns = {pattern({{2, 64}, {2, 32}, {2, 16}, {16, 1}})}; },
       {"consumer pattern at (0,2)", "4 dims", "compute tile BDs allow 3"}},
      {"WrapTooLarge", [](Design& d) {
         d = passthrough_design(1, 4096);
         F(d, "in_l1").consumer_patterns = {pattern({{2048, 1}})};
       },
       {"size 2048 outside [1, 1024]", "bd_max_wrap"}},
      {"RepeatTooLarge", [](Design& d) { L(d).sequence[0].pattern = pattern({{2, 1}}, 0, 256); },
       {"dma task 0", "repeat 256 outside [1, 255]"}},
      {"PatternOutOfBounds", [](Design& d) { F(d, "in_l1").producer_pattern = pattern({{2, 64}, {64, 1}}, 8); },
       {"fifo 'in_l1' producer pattern at (0,1)", "reaches element 135", "holds 128 elements"}},
      {"ContiguousWithOffset", [](Design& d) { L(d).sequence[0].pattern.offset = 4; }, {"dma task 0", "offset 4 needs explicit dims"}},
      {"SplitPartsOverlap", [](Design& d) {
         F(d, "in_l2").object_bytes = 512;
         L(d).fifos.push_back(fifo("extra", {0, 1}, {{0, 3}}, 256));
         L(d).links[0] = {{0, 1}, {"in_l2"}, {"in_l1", "extra"}, {0, 128}};
       },
       {"link at (0,1) (split of 'in_l2')", "parts overlap at byte 128"}},
      {"SplitPartsDoNotAddUp", [](Design& d) {
         F(d, "in_l2").object_bytes = 1024;
         L(d).fifos.push_back(fifo("extra", {0, 1}, {{0, 3}}, 256));
         L(d).links[0] = {{0, 1}, {"in_l2"}, {"in_l1", "extra"}, {0, 256}};
       },
       {"link at (0,1) (split of 'in_l2')", "parts add up to 512 bytes, the object has 1024"}},
      {"ForwardSizeMismatch", [](Design& d) { F(d, "in_l2").object_bytes = 512; d.host_buffers[0].bytes = 2048; },
       {"forward from 'in_l2' (512 bytes) to 'in_l1' (256 bytes)"}},
      {"MemEndpointWithoutLink", [](Design& d) { L(d).links.pop_back(); }, {"fifo 'out_l1' ends at mem tile (0,1)", "no link"}},
      {"LinkInputNotConsumedThere", [](Design& d) { L(d).links[0].inputs = {"out_l2"}; },
       {"input fifo 'out_l2' is not consumed by (0,1)"}},
      {"AcquireWrongPort", [](Design& d) { body(d)[0] = acquire_out("in_l1"); },
       {"core (0,2)", "produce port of fifo 'in_l1'", "not its producer"}},
      {"AcquireBeyondDepth", [](Design& d) { body(d)[0] = acquire_in("in_l1", 3); },
       {"core (0,2)", "acquire 3 of fifo 'in_l1'", "depth 2"}},
      {"ReleaseMoreThanHeld", [](Design& d) { body(d)[3] = release_in("in_l1", 2); },
       {"release 2 consume of fifo 'in_l1' but only 1 acquired"}},
      {"UnbalancedLoop", [](Design& d) { body(d).erase(body(d).begin() + 3); },
       {"loop body changes the consume objects held of fifo 'in_l1' from 0 to 1"}},
      {"CallOnUnacquiredObject", [](Design& d) { body(d)[2].args[0] = "in_l1[1]"; },
       {"call 't_copy' uses 'in_l1[1]'", "holds 1", "race on silicon"}},
      {"UnknownKernel", [](Design& d) { body(d)[2].kernel = "nope"; }, {"core (0,2)", "kernel 'nope' is not registered"}},
      {"UnknownArgument", [](Design& d) { body(d)[2].args[1] = "scratch"; },
       {"argument 'scratch' is neither a fifo nor a buffer of tile (0,2)"}},
      {"ProducedObjectNeverReleased", [](Design& d) { body(d).push_back(acquire_out("out_l1")); body(d).push_back(release_out("out_l1")); L(d).cores[0].program.push_back(acquire_out("out_l1")); },
       {"ends holding 1 unreleased objects of fifo 'out_l1'"}},
      {"EndpointNeverAcquired", [](Design& d) { F(d, "in_l1").consumers.push_back({1, 2}); },
       {"fifo 'in_l1' consumer end at compute tile (1,2) is never acquired"}},
      {"TaskWithoutShimEnd", [](Design& d) { L(d).sequence.push_back(to_device("in_l1", "in")); },
       {"dma task 2 (to_device 'in_l1' <- 'in')", "no shim producer"}},
      {"TaskHostBufferMissing", [](Design& d) { L(d).sequence[1].host_buffer = "nowhere"; },
       {"dma task 1", "host buffer does not exist"}},
      {"TaskNotWholeObjects", [](Design& d) { L(d).sequence[0].pattern = pattern({{100, 1}}); },
       {"dma task 0", "moves 200 bytes, not a whole number of 256-byte objects"}},
      {"ShimFifoWithoutTask", [](Design& d) { L(d).sequence.pop_back(); }, {"fifo 'out_l2' has a shim end but no DmaTask"}},
      {"L1Overflow", [](Design& d) { L(d).buffers = {{"big", {0, 2}, 64 * 1024, -1}}; },
       {"L1 memory of compute tile (0,2) overflows", "'big' needs 65536 bytes", "memory map of compute tile (0,2)",
        "in_l1@(0,2) [2 x 256]"}},
      {"FixedAddressOverlap", [](Design& d) { L(d).buffers = {{"a", {0, 2}, 64, 0}, {"b", {0, 2}, 64, 32}}; },
       {"'b' needs 64 bytes", "fixed at 0x20 overlaps"}},
      {"TooManyInputChannels", [](Design& d) {
         for (int i : {1, 2}) {
           std::string n = "x" + std::to_string(i);
           L(d).fifos.push_back(fifo(n, {i, 0}, {{0, 2}}, 256));
           L(d).sequence.push_back(to_device(n, "in"));
           L(d).cores[0].program.push_back(acquire_in(n));
           L(d).cores[0].program.push_back(release_in(n));
         }
       },
       {"compute tile (0,2) needs 3 S2MM (in) DMA channels", "in_l1, x1, x2", "limit 2"}},
      {"TooManyBDs", [](Design& d) { F(d, "in_l1").depth = 17; }, {"compute tile (0,2) needs 19 buffer descriptors", "limit 16"}},
      // A resident group with a streamed tail (Fifo::repeat_tail): its link
      // pool must hold the group and a tail slot, fit L2 and the mem tile's
      // BDs; each refusal names the fifo or pool and the limit.
      {"TailWithoutASlot", [](Design& d) { F(d, "in_l1").repeat = 2; F(d, "in_l1").repeat_group = 2; F(d, "in_l1").repeat_tail = 1; },
       {"fifo 'in_l1' keeps a resident group of 2 objects", "link pool of 3 objects", "it holds 2"}},
      {"TailOnAShim", [](Design& d) { F(d, "in_l2").repeat_tail = 1; },
       {"fifo 'in_l2'", "only a mem-tile producer"}},
      {"ResidentGroupOverflowsL2", [](Design& d) {
         F(d, "in_l2").depth = 2100;
         F(d, "in_l1").repeat = 2; F(d, "in_l1").repeat_group = 2099; F(d, "in_l1").repeat_tail = 1;
       },
       {"L2 memory of mem tile (0,1) overflows", "link0@(0,1) [2100 x 256]", "capacity 524288"}},
      {"ResidentGroupOverflowsMemTileBDs", [](Design& d) {
         F(d, "in_l2").depth = 44;
         F(d, "in_l1").repeat = 2; F(d, "in_l1").repeat_group = 43; F(d, "in_l1").repeat_tail = 1;
       },
       {"mem tile (0,1) needs 50 buffer descriptors", "in_l2 44, in_l1 2", "limit 48"}},
      {"TooManyShimTasks", [](Design& d) {
         d = passthrough_design(16, 256);
         L(d).sequence.clear();
         for (int i = 0; i < 16; ++i) L(d).sequence.push_back(to_device("in_l2", "in", pattern({{128, 1}}, 128 * i)));
         L(d).sequence.push_back(from_device("out_l2", "out"));
       },
       {"shim tile (0,0) needs 17 buffer descriptors", "one per DmaTask", "limit 16"}},
      {"TooManyLocks", [](Design& d) {
         for (int i = 0; i < 7; ++i) {
           std::string n = "self" + std::to_string(i);
           L(d).fifos.push_back(fifo(n, {0, 2}, {{0, 2}}, 32, 1));
           L(d).cores[0].program.push_back(acquire_out(n));
           L(d).cores[0].program.push_back(release_out(n));
           L(d).cores[0].program.push_back(acquire_in(n));
           L(d).cores[0].program.push_back(release_in(n));
         }
       },
       {"compute tile (0,2) needs 18 locks", "limit 16"}},
  };
  return c;
}

class ValidatorRule : public ::testing::TestWithParam<Case> {};

TEST_P(ValidatorRule, BreakingExactlyThisRuleIsNamed) {
  Design d = passthrough_design();
  GetParam().mutate(d);
  try {
    check(d);
    FAIL() << "expected a DesignError";
  } catch (const DesignError& e) {
    for (const char* want : GetParam().expect)
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << "missing '" << want << "' in:\n" << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, ValidatorRule, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

TEST(Allocator, PlacesFixedBuffersAndBankAlignsLargeOnes) {
  Design d = passthrough_design(2, 8192);
  L(d).buffers = {{"fixed", {0, 2}, 1024, 0}, {"acc", {0, 2}, 100, -1}};
  LaunchLayout lay = layout_launch(L(d), xdna2());
  EXPECT_EQ((lay.buffer_address.at({"fixed", TileCoord{0, 2}})), 0);
  for (const auto& p : lay.pools)
    if (p.tile == TileCoord{0, 2}) {
      EXPECT_EQ(p.address % 8192, 0) << p.name;  // 16 KiB pools start on banks
    }
  EXPECT_EQ(lay.buffer_address.at({"acc", TileCoord{0, 2}}) % 32, 0);
  EXPECT_EQ(lay.memory.at({0, 1}).blocks.size(), 2u);  // one pool per link
  EXPECT_EQ(lay.bds.at({0, 0}), 2);                    // one per DmaTask
}

// Bank alignment leaves 7 KiB gaps between four 9000-byte blocks, so a fifth
// of 14000 bytes has no aligned or unaligned gap although the five fit 64 KiB
// packed: the allocator must fall back to packing, and still refuse what does
// not fit packed either.
TEST(Allocator, BankAlignmentNeverRefusesWhatFitsPacked) {
  Design d = passthrough_design(2, 256);
  for (const char* n : {"a", "b", "c", "d"}) L(d).buffers.push_back({n, {0, 2}, 9000, -1});
  L(d).buffers.push_back({"e", {0, 2}, 14000, -1});
  const LaunchLayout lay = layout_launch(L(d), xdna2());
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const auto& b : lay.memory.at({0, 2}).blocks) spans.emplace_back(b.address, b.address + b.bytes);
  std::sort(spans.begin(), spans.end());
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_LE(spans[i].second, 65536);
    if (i > 0) {
      EXPECT_LE(spans[i - 1].second, spans[i].first) << "blocks overlap";
    }
  }
  L(d).buffers.push_back({"f", {0, 2}, 15000, -1});
  EXPECT_THROW(layout_launch(L(d), xdna2()), DesignError);
}

TEST(Allocator, SharedMemoryRules) {
  const DeviceSpec& s = xdna2();
  EXPECT_TRUE(shares_memory(fifo("f", {1, 2}, {{1, 3}}, 64), s));
  EXPECT_TRUE(shares_memory(fifo("f", {1, 2}, {{2, 2}}, 64), s));
  EXPECT_FALSE(shares_memory(fifo("f", {1, 2}, {{3, 2}}, 64), s));
  EXPECT_FALSE(shares_memory(fifo("f", {1, 2}, {{1, 3}, {1, 4}}, 64), s));
  EXPECT_FALSE(shares_memory(fifo("f", {1, 1}, {{1, 2}}, 64), s));
  EXPECT_EQ(shared_home(fifo("f", {1, 2}, {{2, 2}}, 64)), (TileCoord{1, 2}));  // east consumer reaches west memory
  EXPECT_EQ(shared_home(fifo("f", {2, 2}, {{1, 2}}, 64)), (TileCoord{1, 2}));
}

}  // namespace
}  // namespace tessera::npu
