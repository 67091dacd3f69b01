// tessera generate: text generation on the CPU FP32 oracle, streamed to stdout
// as tokens arrive; timing goes to stderr so stdout is only the generated text.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_common.h"
#include "command.h"
#include "tessera/core/error.h"
#include "tessera/model/model_dir.h"
#include "tessera/model/tokenizer.h"
#include "tessera/oracle/oracle.h"
#include "tessera/runtime/sampler.h"

namespace {

using Clock = std::chrono::steady_clock;

struct GenerateArgs {
  std::string model_dir;
  std::string prompt;
  int64_t max_tokens = 64;
  bool print_ids = false;
  bool chat = false;
  tessera::runtime::SamplingOptions sampling;
};

using tessera::cli::TextStream;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string rate(int64_t n, double s) {
  return s > 0 && n > 0 ? fmt::format("{:.2f} tok/s", static_cast<double>(n) / s) : "n/a";
}

int run(const GenerateArgs& a) {
  using namespace tessera;
  runtime::Sampler sampler(a.sampling);  // validates the options before any loading
  const std::filesystem::path dir(a.model_dir);
  model::ModelDir md = model::load_model(dir);
  const auto tok = model::load_tokenizer(dir, md.config);
  const std::vector<int32_t> prompt = tessera::cli::encode_prompt(tok, a.prompt, a.chat, dir);
  if (prompt.empty()) throw_error<UsageError>("the prompt encodes to no tokens");
  const oracle::Oracle oracle(md.config, md.weights);
  oracle::KvCache cache = oracle.new_cache();
  const auto& eos = md.config.eos_token_ids;

  const auto t0 = Clock::now();
  Tensor logits = oracle.forward(prompt, cache);
  const auto t1 = Clock::now();
  std::vector<int32_t> generated;
  TextStream stream;
  int64_t decode_steps = 0;
  bool stopped_at_eos = false, context_full = false;
  while (static_cast<int64_t>(generated.size()) < a.max_tokens) {
    const int32_t next = sampler.sample(logits.as<float>());
    if (std::find(eos.begin(), eos.end(), next) != eos.end()) {
      stopped_at_eos = true;
      break;
    }
    generated.push_back(next);
    std::fputs(stream.next(tok.decode(generated, true), false).c_str(), stdout);
    std::fflush(stdout);
    if (static_cast<int64_t>(generated.size()) == a.max_tokens) break;
    // The next token would sit past the model's last position: stop, as `run` does.
    if (cache.length() >= md.config.max_position_embeddings) {
      context_full = true;
      break;
    }
    logits = oracle.forward(std::span(&next, 1), cache);
    ++decode_steps;
  }
  const auto t2 = Clock::now();
  std::fputs(stream.next(tok.decode(generated, true), true).c_str(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);
  const std::string stop = stopped_at_eos ? ", stopped at EOS"
                           : context_full ? fmt::format(", stopped: context full ({} positions)",
                                                        md.config.max_position_embeddings)
                                          : "";
  std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%s); generation: %zu tokens, %lld decode "
               "steps in %.3f s (%s)%s\n",
               prompt.size(), seconds(t1 - t0),
               rate(static_cast<int64_t>(prompt.size()), seconds(t1 - t0)).c_str(),
               generated.size(), static_cast<long long>(decode_steps), seconds(t2 - t1),
               rate(decode_steps, seconds(t2 - t1)).c_str(), stop.c_str());
  if (a.print_ids) std::fprintf(stderr, "ids: %s\n", fmt::format("{}", fmt::join(generated, ",")).c_str());
  return 0;
}

tessera::cli::Action setup_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* sub = app.add_subcommand("generate", "Generate text with the CPU FP32 oracle");
  sub->add_option("-m,--model", args->model_dir, "Hugging Face model directory or .gguf file")
      ->required();
  sub->add_option("-p,--prompt", args->prompt, "Prompt text")->required();
  sub->add_option("-n,--max-tokens", args->max_tokens, "Tokens to generate at most")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  tessera::cli::add_sampling_options(sub, args->sampling);
  sub->add_flag("--chat", args->chat,
                "Send the prompt as a user message in the model's chat template");
  sub->add_flag("--print-ids", args->print_ids, "Also print the generated token ids to stderr");
  return [args] { return run(*args); };
}
TESSERA_COMMAND("generate", setup_generate);

}  // namespace
