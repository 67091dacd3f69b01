// tessera tune: the tile search (kernels/tile_search.h) over every (kernel,
// shape) a model needs for a prompt of S tokens (prefill) and the decode step
// after it; prints the chosen options, the runner-up and the builder default
// with their predicted times, slowest first.
#include <algorithm>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "tessera/compiler/graph.h"
#include "tessera/core/error.h"
#include "tessera/kernels/tile_search.h"
#include "tessera/model/config.h"
#include "tessera/npu/device_spec.h"

namespace {

struct TuneArgs {
  std::string preset;
  int64_t seq = 17;
  std::string spec = "xdna2";
  std::string json;
};

struct Row {
  std::string phase;
  tessera::kernels::OpShape shape;
  tessera::kernels::TileChoice choice;
};

nlohmann::json timing_json(const tessera::kernels::TileTiming& t) {
  return {{"tiles", t.tiles}, {"seconds", t.seconds}, {"bound", t.bound}};
}

int run_tune(const TuneArgs& a) {
  using namespace tessera;
  const npu::DeviceSpec spec = cli::spec_from_arg(a.spec);
  model::ModelConfig c = model::preset(a.preset);
  c.num_layers = 1;  // every layer has the same shapes
  std::vector<Row> rows;
  std::vector<std::pair<std::string, compiler::Graph>> passes;
  if (a.seq > 1) passes.emplace_back("prefill", compiler::build_graph(c, a.seq, 0));
  passes.emplace_back("decode", compiler::build_graph(c, 1, a.seq > 1 ? a.seq : 0));
  for (const auto& [phase, g] : passes)
    for (const auto& shape : compiler::unique_op_shapes(g))
      rows.push_back({phase, shape, kernels::search_tiles(shape, spec)});
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
    return x.choice.best.seconds > y.choice.best.seconds;
  });
  fmt::print("tile search: {} on {}, S={} (times predicted by the static timing model, dispatch "
             "overhead included)\n", a.preset, spec.name, a.seq);
  fmt::print("{:<8} {:<50} {:>5} {:>10} {:<9} {:<48} {:>10} {:>10} {:<48} {}\n", "phase", "op",
             "cands", "best_us", "bound", "best tiles", "runner_us", "default_us", "default tiles",
             "runner-up tiles");
  nlohmann::json out = nlohmann::json::array();
  for (const Row& r : rows) {
    const auto& ch = r.choice;
    const bool runner = ch.candidates > 1;
    fmt::print("{:<8} {:<50} {:>5} {:>10.1f} {:<9} {:<48} {:>10} {:>10.1f} {:<48} {}\n", r.phase,
               compiler::shape_text(r.shape), ch.candidates, ch.best.seconds * 1e6, ch.best.bound,
               kernels::tiles_text(ch.best.tiles),
               runner ? fmt::format("{:.1f}", ch.runner_up.seconds * 1e6) : "-",
               ch.builder_default.seconds * 1e6, kernels::tiles_text(ch.builder_default.tiles),
               runner ? kernels::tiles_text(ch.runner_up.tiles) : "-");
    nlohmann::json j = {{"phase", r.phase},
                        {"shape", compiler::shape_text(r.shape)},
                        {"candidates", ch.candidates},
                        {"best", timing_json(ch.best)},
                        {"default", timing_json(ch.builder_default)}};
    if (runner) j["runner_up"] = timing_json(ch.runner_up);
    out.push_back(std::move(j));
  }
  if (!a.json.empty()) {
    std::ofstream f(a.json);
    if (!f) throw_error<FileError>("tune: cannot write {}", a.json);
    f << nlohmann::json{{"model", a.preset}, {"spec", spec.name}, {"seq", a.seq}, {"ops", out}}.dump(2)
      << "\n";
  }
  return 0;
}

tessera::cli::Action setup_tune(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "tune", "Tile search: time every legal tile option of each (kernel, shape) of a model");
  auto a = std::make_shared<TuneArgs>();
  sub->add_option("--preset", a->preset, "Built-in model preset")->required();
  sub->add_option("--seq", a->seq, "Prefill length S (decode runs at context S; 1 = decode only)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--spec", a->spec, "Device: xdna2 | xdna1 | spec JSON file")->capture_default_str();
  sub->add_option("--json", a->json, "Write the choices as JSON here");
  return [a, sub] {
    if (!sub->parsed()) return 0;
    return run_tune(*a);
  };
}
TESSERA_COMMAND("tune", setup_tune);

}  // namespace
