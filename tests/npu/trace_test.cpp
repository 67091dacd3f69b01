// The Chrome trace of a timing estimate: valid trace-event structure, one track
// per compute tile and per shim channel, spans that add up to the estimate.
#include <cstdio>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "tessera/core/error.h"
#include "tessera/npu/designs.h"
#include "tessera/npu/trace.h"

namespace tessera::npu {
namespace {

TEST(Trace, TracksAndSpansFollowTheEstimate) {
  DeviceSpec spec = DeviceSpec::preset("xdna2-sourced");
  KernelRegistry reg;
  register_microbench_kernels(reg);
  Design d = gemm_design({128, 64, 64, 32, 32, 32, 2, 2}, spec);
  d.launches.push_back(d.launches[0]);  // two launches: a reconfiguration span too
  DispatchTiming t = estimate_time(d, spec, reg);
  nlohmann::json j = chrome_trace(t);

  ASSERT_TRUE(j.contains("traceEvents"));
  std::map<int, std::string> threads;
  std::set<std::string> launch_spans;
  double end_us = 0, dispatch_sum_us = 0;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid")) << e.dump();
    if (e["ph"] == "M" && e["name"] == "thread_name")
      threads[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
    if (e["ph"] != "X") continue;
    ASSERT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("tid")) << e.dump();
    EXPECT_GE(e["dur"].get<double>(), 0);
    ASSERT_TRUE(threads.count(e["tid"].get<int>())) << "span on an unnamed track: " << e.dump();
    end_us = std::max(end_us, e["ts"].get<double>() + e["dur"].get<double>());
    if (threads[e["tid"].get<int>()] == "dispatch") {
      dispatch_sum_us += e["dur"].get<double>();
      if (e["name"].get<std::string>().rfind("launch ", 0) == 0) launch_spans.insert(e["name"]);
    }
  }
  std::set<std::string> names;
  for (const auto& [tid, name] : threads) names.insert(name);
  // 2 x 2 compute tiles, and per column shim: A (col 0/1), B, C channels.
  for (std::string tile : {"tile (0,2)", "tile (0,3)", "tile (1,2)", "tile (1,3)"})
    EXPECT_TRUE(names.count(tile)) << tile;
  for (std::string ch : {"shim (0,0) mm2s A0", "shim (1,0) mm2s B1", "shim (1,0) s2mm C1"})
    EXPECT_TRUE(names.count(ch)) << ch;
  EXPECT_EQ(names.size(), 1u + 4u + 6u);
  EXPECT_EQ(launch_spans.size(), 1u);  // both launches carry the same name
  EXPECT_NEAR(dispatch_sum_us, t.total_seconds * 1e6, 1e-6);
  EXPECT_NEAR(end_us, t.total_seconds * 1e6, 1e-6);

  std::string path = ::testing::TempDir() + "/tessera_trace_test.json";
  write_chrome_trace(t, path);
  std::ifstream in(path);
  EXPECT_EQ(nlohmann::json::parse(in), j);
  std::remove(path.c_str());
  EXPECT_THROW(write_chrome_trace(t, "/nonexistent-dir/x.json"), FileError);
}

}  // namespace
}  // namespace tessera::npu
