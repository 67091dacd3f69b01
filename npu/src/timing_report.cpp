// Human and JSON renderings of a timing estimate.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "tessera/npu/timing.h"

namespace tessera::npu {

namespace {
nlohmann::json coord(TileCoord t) { return {t.col, t.row}; }
}  // namespace

std::string DispatchTiming::summary() const {
  std::string out = fmt::format(
      "{}: {:.1f} us, bound by {}; overhead {:.1f} us; DDR {:.3f} MB, L2 {:.3f} MB, "
      "L1 {:.3f} MB; {:.3f} GMAC, utilization {:.1f} %\n",
      design, total_seconds * 1e6, bound, overhead_seconds * 1e6, ddr_bytes / 1e6,
      l2_bytes / 1e6, l1_bytes / 1e6, macs / 1e9, utilization * 100);
  for (const auto& l : launches)
    out += fmt::format(
        "  launch {}: {:.1f} us = {:.1f} reconfigure + max(compute {:.1f} [{}], stream {:.1f} "
        "[{}], dma {:.1f} [{}], ddr {:.1f}) + fill/drain {:.2f}; bound by {}\n",
        l.name, l.total_seconds * 1e6, l.reconfigure_seconds * 1e6, l.compute_seconds * 1e6,
        l.busiest_tile, l.stream_seconds * 1e6, l.busiest_port, l.dma_seconds * 1e6,
        l.busiest_channel, l.ddr_seconds * 1e6, l.fill_drain_seconds * 1e6, l.bound);
  return out;
}

nlohmann::json DispatchTiming::to_json() const {
  nlohmann::json j = {{"design", design},
                      {"total_seconds", total_seconds},
                      {"overhead_seconds", overhead_seconds},
                      {"bound", bound},
                      {"ddr_bytes", ddr_bytes},
                      {"l2_bytes", l2_bytes},
                      {"l1_bytes", l1_bytes},
                      {"macs", macs},
                      {"utilization", utilization},
                      {"peak_macs_per_second", peak_macs_per_second},
                      {"launches", nlohmann::json::array()}};
  for (const auto& l : launches) {
    nlohmann::json lj = {{"name", l.name},
                         {"total_seconds", l.total_seconds},
                         {"reconfigure_seconds", l.reconfigure_seconds},
                         {"compute_seconds", l.compute_seconds},
                         {"stream_seconds", l.stream_seconds},
                         {"dma_seconds", l.dma_seconds},
                         {"ddr_seconds", l.ddr_seconds},
                         {"fill_drain_seconds", l.fill_drain_seconds},
                         {"bound", l.bound},
                         {"busiest_tile", l.busiest_tile},
                         {"busiest_port", l.busiest_port},
                         {"busiest_channel", l.busiest_channel},
                         {"ddr_bytes", l.ddr_bytes},
                         {"ddr_burst_bytes", l.ddr_burst_bytes},
                         {"l2_bytes", l.l2_bytes},
                         {"l1_bytes", l.l1_bytes},
                         {"macs", l.macs},
                         {"utilization", l.utilization},
                         {"tiles", nlohmann::json::array()},
                         {"channels", nlohmann::json::array()}};
    for (const auto& t : l.tiles)
      lj["tiles"].push_back({{"tile", coord(t.tile)}, {"calls", t.calls}, {"cycles", t.cycles},
                             {"effective_cycles", t.effective_cycles},
                             {"mac_cycles", t.cost.mac}, {"vector_cycles", t.cost.vector},
                             {"overhead_cycles", t.cost.overhead}, {"macs", t.macs},
                             {"seconds", t.seconds}});
    for (const auto& c : l.channels)
      lj["channels"].push_back({{"tile", coord(c.tile)}, {"kind", tile_kind_name(c.kind)},
                                {"direction", c.s2mm ? "s2mm" : "mm2s"}, {"fifo", c.fifo},
                                {"bytes", c.bytes}, {"dma_bytes", c.dma_bytes},
                                {"stream_seconds", c.stream_seconds},
                                {"dma_seconds", c.dma_seconds}});
    j["launches"].push_back(std::move(lj));
  }
  return j;
}

}  // namespace tessera::npu
