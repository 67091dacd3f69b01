#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "tessera/npu/builder.h"
#include "tessera/npu/errors.h"
#include "tessera/npu/kernel_registry.h"

namespace tessera::npu {
namespace {

using namespace build;

// Touches every field of the IR at least once with a non-default value.
Design full_design() {
  Design d;
  d.name = "dump_all";
  d.host_buffers = {{"a", 4096, 2}, {"c", 2048, 4}};
  Launch l;
  l.name = "first";
  l.buffers = {{"acc", {0, 2}, 1024, -1}, {"lut", {0, 2}, 256, 0x400}};
  Fifo a = fifo("a_l2", {0, 0}, {{0, 1}}, 1024, 2, 2);
  Fifo a1 = fifo("a_l1", {0, 1}, {{0, 2}, {1, 2}}, 512, 3, 2);
  a1.producer_pattern = pattern({{4, 64}, {2, 32}, {32, 1}}, 0, 1);
  a1.consumer_patterns = {{}, pattern({{256, 1}}, 0, 1)};
  Fifo c1 = fifo("c_l1", {0, 2}, {{0, 0}}, 256, 1, 4);
  l.fifos = {a, a1, fifo("spare", {0, 1}, {{2, 2}}, 512), c1};
  l.links = {{{0, 1}, {"a_l2"}, {"a_l1", "spare"}, {0, 512}}};
  l.cores = {{{0, 2},
              {call("zero", {"acc"}, {{"elems", int64_t{256}}}),
               loop(4, {acquire_in("a_l1", 2), call("mm", {"a_l1", "a_l1[1]", "acc"},
                                                     {{"m", int64_t{8}}, {"scale", 0.5}, {"mode", std::string("tn")}}),
                        release_in("a_l1", 2)}),
               acquire_out("c_l1"), call("store", {"acc", "c_l1"}, {{"one", 1.0}}), release_out("c_l1")}}};
  l.sequence = {to_device("a_l2", "a", pattern({{2, 1024}, {1024, 1}}, 0, 2)), from_device("c_l1", "c")};
  Launch second;
  second.name = "second";
  d.launches = {l, second};
  return d;
}

std::string golden_path() { return std::string(TESSERA_TEST_DATA) + "/npu/golden/design_dump.txt"; }

TEST(DesignDump, MatchesGolden) {
  std::string dump = full_design().dump();
  if (std::getenv("TESSERA_UPDATE_GOLDEN")) std::ofstream(golden_path()) << dump;
  std::ifstream in(golden_path());
  ASSERT_TRUE(in) << "missing " << golden_path() << " (run with TESSERA_UPDATE_GOLDEN=1)";
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(dump, ss.str());
}

// Changing any single field changes the dump: nothing is left out.
TEST(DesignDump, EveryFieldShowsUp) {
  const std::string base = full_design().dump();
  std::vector<std::pair<const char*, std::function<void(Design&)>>> edits = {
      {"design.name", [](Design& d) { d.name = "x"; }},
      {"host.name", [](Design& d) { d.host_buffers[0].name = "x"; }},
      {"host.bytes", [](Design& d) { d.host_buffers[0].bytes = 8; }},
      {"host.elem_bytes", [](Design& d) { d.host_buffers[0].elem_bytes = 4; }},
      {"launch.name", [](Design& d) { d.launches[0].name = "x"; }},
      {"buffer.name", [](Design& d) { d.launches[0].buffers[0].name = "x"; }},
      {"buffer.tile", [](Design& d) { d.launches[0].buffers[0].tile = {3, 3}; }},
      {"buffer.bytes", [](Design& d) { d.launches[0].buffers[0].bytes = 8; }},
      {"buffer.address", [](Design& d) { d.launches[0].buffers[0].address = 64; }},
      {"fifo.name", [](Design& d) { d.launches[0].fifos[0].name = "x"; }},
      {"fifo.producer", [](Design& d) { d.launches[0].fifos[0].producer = {5, 0}; }},
      {"fifo.consumers", [](Design& d) { d.launches[0].fifos[0].consumers.push_back({4, 4}); }},
      {"fifo.depth", [](Design& d) { d.launches[0].fifos[0].depth = 7; }},
      {"fifo.object_bytes", [](Design& d) { d.launches[0].fifos[0].object_bytes = 8; }},
      {"fifo.elem_bytes", [](Design& d) { d.launches[0].fifos[0].elem_bytes = 1; }},
      {"fifo.repeat_tail", [](Design& d) { d.launches[0].fifos[0].repeat_tail = 2; }},
      {"fifo.producer_pattern", [](Design& d) { d.launches[0].fifos[1].producer_pattern.dims[0].stride = 65; }},
      {"fifo.consumer_patterns", [](Design& d) { d.launches[0].fifos[1].consumer_patterns[1].repeat = 3; }},
      {"pattern.offset", [](Design& d) { d.launches[0].fifos[1].producer_pattern.offset = 9; }},
      {"link.tile", [](Design& d) { d.launches[0].links[0].tile = {1, 1}; }},
      {"link.inputs", [](Design& d) { d.launches[0].links[0].inputs[0] = "x"; }},
      {"link.outputs", [](Design& d) { d.launches[0].links[0].outputs[1] = "x"; }},
      {"link.offsets", [](Design& d) { d.launches[0].links[0].offsets_bytes[1] = 64; }},
      {"core.tile", [](Design& d) { d.launches[0].cores[0].tile = {3, 3}; }},
      {"op.count", [](Design& d) { d.launches[0].cores[0].program[1].count = 5; }},
      {"op.kind", [](Design& d) { d.launches[0].cores[0].program[1].body[0].kind = CoreOp::Kind::release; }},
      {"op.port", [](Design& d) { d.launches[0].cores[0].program[2].port = CoreOp::Port::consume; }},
      {"op.fifo", [](Design& d) { d.launches[0].cores[0].program[2].fifo = "x"; }},
      {"op.kernel", [](Design& d) { d.launches[0].cores[0].program[0].kernel = "x"; }},
      {"op.args", [](Design& d) { d.launches[0].cores[0].program[0].args[0] = "x"; }},
      {"op.params.int", [](Design& d) { d.launches[0].cores[0].program[0].params["elems"] = int64_t{3}; }},
      {"op.params.double", [](Design& d) { d.launches[0].cores[0].program[3].params["one"] = 1.5; }},
      {"op.params.type", [](Design& d) { d.launches[0].cores[0].program[3].params["one"] = int64_t{1}; }},
      {"op.body", [](Design& d) { d.launches[0].cores[0].program[1].body.pop_back(); }},
      {"task.fifo", [](Design& d) { d.launches[0].sequence[0].fifo = "x"; }},
      {"task.host_buffer", [](Design& d) { d.launches[0].sequence[0].host_buffer = "x"; }},
      {"task.pattern", [](Design& d) { d.launches[0].sequence[0].pattern.repeat = 1; }},
      {"task.to_device", [](Design& d) { d.launches[0].sequence[0].to_device = false; }},
  };
  for (const auto& [what, edit] : edits) {
    Design d = full_design();
    edit(d);
    EXPECT_NE(d.dump(), base) << what;
  }
}

TEST(DesignIr, SmallHelpers) {
  EXPECT_EQ(to_string(TileCoord{3, 5}), "(3,5)");
  EXPECT_EQ(pattern({{4, 64}, {2, 32}, {32, 1}}).elements_per_repeat(), 256);
  EXPECT_EQ(AccessPattern{}.elements_per_repeat(), 0);
  EXPECT_TRUE(AccessPattern{}.contiguous());
}

TEST(KernelRegistry, LookupsAndParamsAreTyped) {
  KernelRegistry r;
  r.add({"k", [](const KernelInvocation&) {}, nullptr, nullptr});
  EXPECT_TRUE(r.contains("k"));
  EXPECT_EQ(r.names(), std::vector<std::string>{"k"});
  EXPECT_THROW(r.get("missing"), DesignError);
  EXPECT_THROW(r.add({"", [](const KernelInvocation&) {}, nullptr, nullptr}), DesignError);
  KernelParams p = {{"n", int64_t{4}}, {"x", 0.25}, {"s", std::string("t")}};
  KernelInvocation inv{{}, &p};
  EXPECT_EQ(inv.int_param("n"), 4);
  EXPECT_DOUBLE_EQ(inv.float_param("x"), 0.25);
  EXPECT_DOUBLE_EQ(inv.float_param("n"), 4.0);
  EXPECT_THROW(inv.int_param("x"), DesignError);
  EXPECT_THROW(inv.float_param("s"), DesignError);
  try {
    inv.int_param("k");
    FAIL();
  } catch (const DesignError& e) {
    EXPECT_NE(std::string(e.what()).find("'k' missing (call has: n, s, x)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::npu
