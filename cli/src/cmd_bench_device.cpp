// tessera bench-device: the three reference designs on the timing model next to
// the published measurements (hardware.md), a reduced-size functional run of
// each on the simulator, and optionally a calibration written as a spec JSON.
#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "tessera/compiler/calibration.h"
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
  bool llama = false;
  bool leave_one_out = true;
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

void print_figures(const tessera::compiler::LlamaFigures& figs, const DeviceSpec& before,
                   const DeviceSpec& after) {
  fmt::print("{:<50} {:>10} {:>10} {:>8} {:<9} {:>10} {:>8} {}\n", "figure", "published",
             before.name, "error", "bound", after.name, "error", "bound");
  for (const auto& f : figs.figures()) {
    auto b = f(before), a = f(after);
    fmt::print("{:<50} {:>10.4g} {:>10.4g} {:>+7.1f}% {:<9} {:>10.4g} {:>+7.1f}% {}{}\n", f.name,
               f.published_seconds * 1e3, b.seconds * 1e3, (b.seconds / f.published_seconds - 1) * 100,
               b.bound, a.seconds * 1e3, (a.seconds / f.published_seconds - 1) * 100, a.bound,
               f.fitted ? "" : "  (not fitted)");
  }
}

// The Llama-3.2-1B calibration (compiler/calibration.h): fit, leave-one-out,
// and the spec written to o.calibrate_out.
nlohmann::json calibrate_llama(const DeviceSpec& start, const Options& o) {
  namespace tc = tessera::compiler;
  const tc::LlamaFigures figs(start);
  tc::FitResult r = tc::fit(figs, start);
  r.spec.name = "xdna2-calibrated";
  const auto fitted = std::count_if(figs.figures().begin(), figs.figures().end(),
                                    [](const auto& f) { return f.fitted; });
  r.spec.calibration = fmt::format(
      "fit to {} published Llama-3.2-1B figures (docs/calibration.md), sum of squared log "
      "errors {:.3f}", fitted, r.loss_after);
  r.spec.constrained_kernels = figs.kernels();
  write_file(o.calibrate_out, r.spec.to_json().dump(2) + "\n");
  const auto loo = o.leave_one_out ? tc::leave_one_out(figs, r.spec) : std::vector<tc::LeaveOneOut>{};
  nlohmann::json j = {{"loss_before", r.loss_before}, {"loss_after", r.loss_after},
                      {"spec", r.spec.to_json()}, {"figures", nlohmann::json::array()},
                      {"leave_one_out", nlohmann::json::array()}, {"notes", figs.notes()}};
  for (const auto& f : figs.figures()) {
    auto a = f(r.spec);
    j["figures"].push_back({{"name", f.name}, {"group", f.group}, {"config", f.config},
                            {"published_seconds", f.published_seconds},
                            {"predicted_seconds", a.seconds}, {"bound", a.bound},
                            {"fitted", f.fitted}});
  }
  for (const auto& l : loo)
    j["leave_one_out"].push_back({{"name", l.figure}, {"published_seconds", l.published},
                                  {"predicted_seconds", l.predicted}});
  if (o.json) return j;
  fmt::print("\nLlama-3.2-1B calibration from {} (sum of squared log errors {:.4f} -> {:.4f}), "
             "written to {}\ntimes in ms:\n", start.name, r.loss_before, r.loss_after,
             o.calibrate_out);
  print_figures(figs, start, r.spec);
  fmt::print("\nfitted fields (published range):\n");
  for (const auto& name : tc::fitted_fields())
    for (const auto& f : field_sources(start.family))
      if (f.field == name)
        fmt::print("  {:<28} {:>12.4g}  [{:.4g}, {:.4g}]  {}\n", name,
                   r.spec.to_json().flatten().value("/" + name, 0.0), f.min, f.max, f.source);
  fmt::print("\nleave one out (fit without the figure, predict it), ms:\n");
  for (const auto& l : loo)
    fmt::print("  {:<50} {:>10.4g} {:>10.4g} {:>+7.1f}%\n", l.figure, l.published * 1e3,
               l.predicted * 1e3, (l.predicted / l.published - 1) * 100);
  for (const auto& n : figs.notes()) fmt::print("note: {}\n", n);
  return j;
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
  if (o.llama && o.calibrate_out.empty()) {
    const tessera::compiler::LlamaFigures figs(spec);
    if (!o.json) {
      fmt::print("\npublished Llama-3.2-1B figures on {} (calibration: {}), ms:\n", spec.name,
                 spec.calibration);
      print_figures(figs, spec, spec);
    }
    nlohmann::json a = nlohmann::json::array();
    for (const auto& f : figs.figures()) {
      auto p = f(spec);
      a.push_back({{"name", f.name}, {"group", f.group}, {"published_seconds", f.published_seconds},
                   {"predicted_seconds", p.seconds}, {"bound", p.bound}});
    }
    out["llama_figures"] = a;
  }
  if (!o.calibrate_out.empty()) out["calibration"] = calibrate_llama(spec, o);
  if (o.json) fmt::print("{}\n", out.dump(2));
  return 0;
}

tessera::cli::Action setup_bench_device(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "bench-device", "Predict the microbenchmarks with the timing model, compare them with the "
                      "published measurements and run them on the simulator");
  auto o = std::make_shared<Options>();
  sub->add_option("--spec", o->spec, "Preset (xdna2 | xdna1) or spec JSON file")
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print one JSON document instead of tables");
  sub->add_flag("--no-sim", o->skip_sim, "Skip the reduced-size simulator runs");
  sub->add_option("--calibrate", o->calibrate_out,
                  "Fit the physical fields to the published Llama-3.2-1B figures (start from --spec, e.g. "
                  "xdna2-sourced); write the spec JSON here");
  sub->add_flag("--llama", o->llama,
                "Predict the published Llama-3.2-1B figures (registry, per-dispatch, end to end)");
  sub->add_flag("!--no-leave-one-out", o->leave_one_out, "With --calibrate: skip the leave-one-out fits");
  sub->add_option("--trace-dir", o->trace_dir,
                  "Write a Chrome/Perfetto trace per benchmark into this directory")
      ->check(CLI::ExistingDirectory);
  return [o] { return run(*o); };
}
TESSERA_COMMAND("bench-device", setup_bench_device);

}  // namespace
