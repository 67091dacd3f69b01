// Chrome trace-event format: "M" metadata events name processes and threads,
// "X" complete events carry ts / dur in microseconds.
#include "tessera/npu/trace.h"

#include <fstream>
#include <map>

#include <fmt/format.h>

#include "tessera/core/error.h"

namespace tessera::npu {

namespace {

class TrackTable {
 public:
  explicit TrackTable(nlohmann::json& events) : events_(events) {}
  int id(const std::string& name) {
    auto [it, fresh] = ids_.emplace(name, static_cast<int>(ids_.size()) + 1);
    if (fresh)
      events_.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", it->second},
                         {"args", {{"name", name}}}});
    return it->second;
  }

 private:
  nlohmann::json& events_;
  std::map<std::string, int> ids_;
};

void span(nlohmann::json& events, int tid, const std::string& name, double start_s, double dur_s,
          nlohmann::json args = nlohmann::json::object()) {
  events.push_back({{"ph", "X"}, {"pid", 1}, {"tid", tid}, {"name", name},
                    {"ts", start_s * 1e6}, {"dur", dur_s * 1e6}, {"args", std::move(args)}});
}

}  // namespace

nlohmann::json chrome_trace(const DispatchTiming& timing) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", 1},
                    {"args", {{"name", "dispatch " + timing.design}}}});
  TrackTable tracks(events);
  int dispatch = tracks.id("dispatch");
  span(events, dispatch, "dispatch overhead", 0, timing.overhead_seconds);
  double t0 = timing.overhead_seconds;
  for (const auto& l : timing.launches) {
    if (l.reconfigure_seconds > 0) span(events, dispatch, "reconfigure", t0, l.reconfigure_seconds);
    double start = t0 + l.reconfigure_seconds;
    double body = l.total_seconds - l.reconfigure_seconds;
    span(events, dispatch, "launch " + l.name, start, body,
         {{"bound", l.bound}, {"compute_us", l.compute_seconds * 1e6},
          {"stream_us", l.stream_seconds * 1e6}, {"dma_us", l.dma_seconds * 1e6},
          {"ddr_us", l.ddr_seconds * 1e6}, {"fill_drain_us", l.fill_drain_seconds * 1e6}});
    // Kernels start once the first objects arrived (half the fill/drain term).
    double kernels_start = start + l.fill_drain_seconds / 2;
    for (const auto& t : l.tiles)
      span(events, tracks.id("tile " + to_string(t.tile)), l.name, kernels_start, t.seconds,
           {{"calls", t.calls}, {"cycles", t.cycles}, {"macs", t.macs}});
    for (const auto& c : l.channels) {
      if (c.kind != TileKind::shim) continue;
      std::string track = fmt::format("shim {} {} {}", to_string(c.tile), c.s2mm ? "s2mm" : "mm2s",
                                      c.fifo);
      span(events, tracks.id(track), l.name, start, c.dma_seconds,
           {{"bytes", c.bytes}, {"dma_bytes", c.dma_bytes}});
    }
    t0 += l.total_seconds;
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
}

void write_chrome_trace(const DispatchTiming& timing, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw_error<FileError>("cannot write trace file '{}'", path);
  out << chrome_trace(timing).dump(1) << '\n';
  if (!out) throw_error<FileError>("failed writing trace file '{}'", path);
}

}  // namespace tessera::npu
