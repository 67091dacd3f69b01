// tessera convert FILE.gguf --out DIR: a Hugging Face model directory
// (config.json, tokenizer.json, tokenizer_config.json, bf16 model.safetensors)
// from a GGUF file, for tools that only read HF directories.
#include <chrono>

#include <fmt/format.h>

#include "command.h"
#include "tessera/core/error.h"
#include "tessera/model/gguf_model.h"
#include "tessera/model/model_dir.h"

namespace {

struct ConvertArgs {
  std::string gguf, out;
};

tessera::cli::Action setup_convert(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  auto* sub = app.add_subcommand("convert", "Convert a GGUF file into a Hugging Face model "
                                            "directory (bf16 safetensors)");
  sub->add_option("gguf", args->gguf, "The .gguf file")->required();
  sub->add_option("--out", args->out, "Output directory")->required();
  return [args] {
    if (!tessera::model::is_gguf_file(args->gguf))
      tessera::throw_error<tessera::FileError>("convert: {} is not a GGUF file", args->gguf);
    const auto t0 = std::chrono::steady_clock::now();
    tessera::model::convert_gguf(args->gguf, args->out);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto written = tessera::model::load_config(std::filesystem::path(args->out) / "config.json");
    fmt::print("{}\nwrote {} in {:.1f} s\n", tessera::model::config_summary(written), args->out, s);
    return 0;
  };
}
TESSERA_COMMAND("convert", setup_convert);

}  // namespace
