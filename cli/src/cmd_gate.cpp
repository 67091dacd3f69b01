// tessera gate kernels: the phase-1 per-kernel gate (pipeline/phase1.h) on a
// model directory or a preset with synthetic weights; prints the table, writes
// the JSON, and fails with the gate exit code when any (kernel, shape) fails.
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "tessera/core/error.h"
#include "tessera/npu/device_spec.h"
#include "tessera/pipeline/phase1.h"

namespace {

struct GateArgs {
  std::string model_dir;
  std::string preset;
  int64_t seq = 17;
  std::string spec = "xdna2";
  std::string json;
  uint64_t seed = 1;
  bool no_sim = false;
};

int run_kernels(const GateArgs& a) {
  using namespace tessera;
  if (a.model_dir.empty() == a.preset.empty())
    throw_error<UsageError>("gate kernels: give exactly one of -m DIR or --preset NAME");
  const npu::DeviceSpec spec = tessera::cli::spec_from_arg(a.spec);
  pipeline::Phase1Options opts;
  opts.seq = a.seq;
  opts.seed = a.seed;
  opts.simulate = !a.no_sim;
  const pipeline::Phase1Report rep = a.preset.empty()
                                         ? pipeline::run_phase1_dir(a.model_dir, spec, opts)
                                         : pipeline::run_phase1_preset(a.preset, spec, opts);
  fmt::print("{}", rep.table());
  if (!a.json.empty()) {
    std::ofstream out(a.json);
    if (!out) throw_error<FileError>("gate kernels: cannot write {}", a.json);
    out << rep.to_json().dump(2) << "\n";
  }
  if (a.no_sim) {
    // Build-only mode judges no numbers: it can only fail (a shape that does
    // not build), never pass the gate.
    for (const auto& r : rep.results)
      if (r.status != pipeline::KernelStatus::not_judged)
        throw_error<GateError>("gate kernels --no-sim: {} [{}] {}", r.node, r.shape, r.message);
    fmt::print("every (kernel, shape) built, validated and timed; numbers not compared "
               "(--no-sim is not a gate pass)\n");
    return 0;
  }
  if (!rep.passed())
    throw_error<GateError>("gate kernels: {} failed the phase-1 gate (see the lines above)",
                           rep.model);
  return 0;
}

tessera::cli::Action setup_gate(CLI::App& app) {
  auto* gate = app.add_subcommand("gate", "Run a numerical gate of the pipeline");
  gate->require_subcommand(1);
  auto* k = gate->add_subcommand(
      "kernels", "Phase 1: every (kernel, shape) of the model alone on the NPU vs the oracle");
  auto a = std::make_shared<GateArgs>();
  k->add_option("-m,--model", a->model_dir, "Model directory (config.json + safetensors)");
  k->add_option("--preset", a->preset, "Built-in preset with seeded synthetic weights");
  k->add_option("--seq", a->seq, "Prefill length S (decode runs at context S; 1 = decode only, P = 0)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  k->add_option("--spec", a->spec, "Device: xdna2 | xdna1 | spec JSON file")->capture_default_str();
  k->add_option("--json", a->json, "Write the results as JSON here");
  k->add_option("--seed", a->seed, "Seed of the prompt and synthetic weights")->capture_default_str();
  k->add_flag("--no-sim", a->no_sim, "Build, validate and time only (no simulation, no metrics)");
  return [a, k] {
    if (!k->parsed()) return 0;
    return run_kernels(*a);
  };
}
TESSERA_COMMAND("gate", setup_gate);

}  // namespace
