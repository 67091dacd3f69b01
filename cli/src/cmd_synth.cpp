// tessera synth: write a synthetic Hugging Face model directory.
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "command.h"
#include "tessera/core/error.h"
#include "tessera/model/config.h"
#include "tessera/model/synth.h"

namespace {

struct SynthArgs {
  std::string preset, config, out;
  uint64_t seed = 0;
  int64_t layers = 0;
};

tessera::cli::Action setup_synth(CLI::App& app) {
  auto args = std::make_shared<SynthArgs>();
  auto* sub = app.add_subcommand("synth", "Write a synthetic model directory (config.json, "
                                          "bf16 model.safetensors, tokenizer.json)");
  auto* p = sub->add_option("--preset", args->preset, "Built-in shape (see `tessera presets`)");
  auto* c = sub->add_option("--config", args->config, "A Hugging Face config.json")
                ->check(CLI::ExistingFile);
  p->excludes(c);
  sub->add_option("--out", args->out, "Output directory")->required();
  sub->add_option("--seed", args->seed, "Weight seed (same seed, same bytes)");
  sub->add_option("--layers", args->layers, "Override the number of layers")
      ->check(CLI::PositiveNumber);
  return [args] {
    if (args->preset.empty() == args->config.empty())
      throw tessera::UsageError("synth: give exactly one of --preset NAME or --config FILE");
    auto cfg = args->preset.empty() ? tessera::model::load_config(args->config)
                                    : tessera::model::preset(args->preset);
    std::optional<int64_t> layers;
    if (args->layers > 0) layers = args->layers;
    auto t0 = std::chrono::steady_clock::now();
    tessera::model::write_synthetic_model(cfg, args->out, args->seed, layers);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto written = tessera::model::synthetic_config(cfg, layers);
    written.name = args->out;
    fmt::print("{}\nwrote {:.2f} GB of bf16 weights in {:.1f} s (seed {})\n",
               tessera::model::config_summary(written),
               static_cast<double>(written.parameter_count()) * 2 / 1e9, s, args->seed);
    return 0;
  };
}
TESSERA_COMMAND("synth", setup_synth);

tessera::cli::Action setup_presets(CLI::App& app) {
  app.add_subcommand("presets", "List the built-in model shapes");
  return [] {
    for (const auto& name : tessera::model::preset_names())
      fmt::print("{}\n", tessera::model::config_summary(tessera::model::preset(name)));
    return 0;
  };
}
TESSERA_COMMAND("presets", setup_presets);

}  // namespace
