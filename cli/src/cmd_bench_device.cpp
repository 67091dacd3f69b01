// tessera bench-device: the three reference designs on the timing model next to
// the published measurements (hardware.md), a reduced-size functional run of
// each on the simulator, and optionally a calibration written as a spec JSON.
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "tessera/core/error.h"
#include "tessera/npu/designs.h"
#include "tessera/npu/device_spec.h"
#include "tessera/npu/errors.h"
#include "tessera/npu/trace.h"

namespace {

using namespace tessera::npu;

struct Options {
  std::string spec = "xdna2";
  bool json = false;
  bool skip_sim = false;
  std::string calibrate_out;
  std::string trace_dir;
};

void print_predictions(const std::string& title, const std::vector<Prediction>& ps) {
  fmt::print("{}\n{:<26} {:>10} {:>10} {:>8} {:>9}  {}\n", title, "benchmark", "published",
             "predicted", "error", "time us", "bound");
  for (const auto& p : ps)
    fmt::print("{:<26} {:>7.2f} {:<2} {:>10.2f} {:>+7.1f}% {:>9.1f}  {}\n", p.name, p.published,
               p.unit == "TFLOPS" ? "TF" : p.unit == "us" ? "us" : "GB", p.predicted, p.relative_error * 100,
               p.seconds * 1e6, p.bound);
}

nlohmann::json predictions_json(const std::vector<Prediction>& ps) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : ps)
    a.push_back({{"name", p.name}, {"unit", p.unit}, {"published", p.published},
                 {"predicted", std::isnan(p.predicted) ? nlohmann::json() : nlohmann::json(p.predicted)},
                 {"relative_error", p.relative_error}, {"seconds", p.seconds}, {"bound", p.bound}});
  return a;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out || !(out << text)) tessera::throw_error<tessera::FileError>("cannot write '{}'", path);
}

int run(const Options& o) {
  DeviceSpec spec = tessera::cli::spec_from_arg(o.spec);
  KernelRegistry registry;
  register_microbench_kernels(registry);
  const auto& benches = published_microbenchmarks();
  nlohmann::json out = {{"spec", spec.name}};
  auto preds = predict(benches, spec, registry);
  out["predictions"] = predictions_json(preds);
  if (!o.json) print_predictions(fmt::format("timing model, spec {}:", spec.name), preds);
  if (!o.trace_dir.empty())
    for (const auto& b : benches) {
      try {
        write_chrome_trace(estimate_time(b.build(spec), spec, registry),
                           o.trace_dir + "/" + b.name + ".trace.json");
      } catch (const DesignError&) {  // benchmark does not fit this spec; listed as n/a above
      }
    }
  if (!o.skip_sim) {
    auto checks = run_functional_checks(spec, registry);
    nlohmann::json cj = nlohmann::json::array();
    if (!o.json) fmt::print("\nsimulator, reduced sizes:\n");
    for (const auto& c : checks) {
      cj.push_back({{"design", c.design}, {"pass", c.pass}, {"max_abs_error", c.max_abs_error},
                    {"ddr_bytes", c.simulated_bytes}, {"macs", c.simulated_macs}});
      if (!o.json)
        fmt::print("  {:<30} {}  max abs error {:.3g}, {} DDR bytes, {} MACs\n", c.design,
                   c.pass ? "PASS" : "FAIL", c.max_abs_error, c.simulated_bytes, c.simulated_macs);
    }
    out["functional"] = cj;
    for (const auto& c : checks)
      if (!c.pass)
        tessera::throw_error<tessera::GateError>("{} does not match its reference", c.design);
  }
  if (!o.calibrate_out.empty()) {
    Calibration cal = calibrate(spec, benches, registry);
    write_file(o.calibrate_out, cal.spec.to_json().dump(2) + "\n");
    out["calibration"] = {{"loss_before", cal.loss_before}, {"loss_after", cal.loss_after},
                          {"after", predictions_json(cal.after)}, {"spec", cal.spec.to_json()}};
    if (!o.json) {
      fmt::print("\ncalibration (sum of squared log errors {:.4f} -> {:.4f}), written to {}\n",
                 cal.loss_before, cal.loss_after, o.calibrate_out);
      print_predictions(fmt::format("timing model, spec {}:", cal.spec.name), cal.after);
    }
  }
  if (o.json) fmt::print("{}\n", out.dump(2));
  return 0;
}

tessera::cli::Action setup(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "bench-device", "Predict the microbenchmarks with the timing model, compare them with the "
                      "published measurements and run them on the simulator");
  auto o = std::make_shared<Options>();
  sub->add_option("--spec", o->spec, "Preset (xdna2 | xdna1) or spec JSON file")
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print one JSON document instead of tables");
  sub->add_flag("--no-sim", o->skip_sim, "Skip the reduced-size simulator runs");
  sub->add_option("--calibrate", o->calibrate_out,
                  "Fit the calibratable fields to the published figures; write the spec JSON here");
  sub->add_option("--trace-dir", o->trace_dir,
                  "Write a Chrome/Perfetto trace per benchmark into this directory")
      ->check(CLI::ExistingDirectory);
  return [o] { return run(*o); };
}
TESSERA_COMMAND("bench-device", setup);

}  // namespace
