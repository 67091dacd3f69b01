// tessera run: text generation on the modelled NPU from a deployment directory
// (tessera deploy). The packed weights, config, tokenizer and device spec are
// verified against manifest.json's verdict chain before use; the text streams to stdout, the timing
// line goes to stderr (as `tessera generate`), predicted NPU time and host
// wall time side by side, never one passed off as the other.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "cli_common.h"
#include "command.h"
#include "tessera/core/error.h"
#include "tessera/model/tokenizer.h"
#include "tessera/pipeline/deployment.h"
#include "tessera/pipeline/manifest.h"
#include "tessera/runtime/profile.h"
#include "tessera/runtime/session.h"

namespace {

namespace fs = std::filesystem;

struct RunArgs {
  std::string dir, prompt, bucket = "exact";
  int64_t max_tokens = 64;
  bool chat = false, profile = false;
  tessera::runtime::SamplingOptions sampling;
};

std::string rate(double n, double s) { return s > 0 ? fmt::format("{:.1f} tok/s", n / s) : "n/a"; }

int run(const RunArgs& a) {
  using namespace tessera;
  runtime::Sampler check(a.sampling);  // validates the options before any loading
  const auto bucket = runtime::parse_bucket_policy(a.bucket);
  const fs::path dir(a.dir);
  const pipeline::DirLock lock(dir, pipeline::DirLock::Mode::shared, "run");  // no deploy writing meanwhile
  const pipeline::OpenedDeployment d = pipeline::open_deployment(dir, "run");
  const auto& tok = d.tokenizer;
  const auto& spec = d.spec;
  const std::vector<int32_t> prompt = cli::encode_prompt(
      tok, a.prompt, a.chat, a.chat ? pipeline::deployment_chat_source(dir, "run --chat") : dir);
  if (prompt.empty()) throw_error<UsageError>("run: the prompt encodes to no tokens");

  runtime::SessionOptions so = d.session;  // the plans phases 4-6 gated
  so.bucket = bucket;
  so.profile = a.profile;
  runtime::Session session(d.config, d.weights, spec, so);
  runtime::GenerateOptions go;
  go.max_new_tokens = a.max_tokens;
  go.sampling = a.sampling;
  std::vector<int32_t> text;
  cli::TextStream stream;
  go.on_token = [&](int32_t t) {
    text.push_back(t);
    std::fputs(stream.next(tok.decode(text, true), false).c_str(), stdout);
    std::fflush(stdout);
    return true;
  };
  const runtime::GenerateResult r = session.generate(prompt, go);
  std::fputs(stream.next(tok.decode(text, true), true).c_str(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);
  const auto& p = r.prefill;
  const double dp = r.decode_predicted_seconds_per_token(), dh = r.decode_host_seconds_per_token();
  std::fprintf(stderr,
               "prompt %lld tokens (bucket %lld); prefill: NPU predicted %.3f ms (%s), host %.3f s; "
               "decode: %zu steps, NPU predicted %s (%.3f ms/token), host %.4f s/token; stop: %s (%s); "
               "predicted on spec %s (calibration: %s)\n",
               static_cast<long long>(p.tokens), static_cast<long long>(p.compiled_tokens),
               p.predicted_seconds * 1e3, rate(static_cast<double>(p.tokens), p.predicted_seconds).c_str(),
               p.host_seconds, r.decode.size(), rate(1, dp).c_str(), dp * 1e3, dh,
               runtime::stop_reason_name(r.stop), r.stop_message.c_str(), spec.name.c_str(),
               spec.calibration.c_str());
  if (a.profile && !r.decode.empty())
    std::fprintf(stderr, "host time per decode token by launch (--profile; predicted on spec %s):\n%s",
                 spec.name.c_str(), runtime::format_profile(runtime::decode_profile(r)).c_str());
  return 0;
}

tessera::cli::Action setup_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* sub = app.add_subcommand("run", "Generate text on the modelled NPU from a deployment directory");
  sub->add_option("dir", a->dir, "Deployment directory (tessera deploy --out)")->required();
  sub->add_option("-p,--prompt", a->prompt, "Prompt text")->required();
  sub->add_option("-n,--max-tokens", a->max_tokens, "Tokens to generate at most")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  tessera::cli::add_sampling_options(sub, a->sampling);
  sub->add_option("--bucket", a->bucket, "Prefill shapes: exact | pow2")->capture_default_str();
  sub->add_flag("--chat", a->chat, "Send the prompt as a user message in the model's chat template");
  sub->add_flag("--profile", a->profile,
                "Print the host time of a decode token per kind of launch beside its predicted NPU time");
  return [a] { return run(*a); };
}
TESSERA_COMMAND("run", setup_run);

}  // namespace
