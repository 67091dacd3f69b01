// tessera chat: an interactive multi-turn chat on the modelled NPU from a
// deployment directory (opened and verified as `tessera run` does). The KV
// cache is kept across turns (runtime::Conversation): each turn prefills only
// the tokens it adds. Replies stream to stdout; after each, one line on stderr
// gives the turn's cache position, appended tokens and the predicted NPU time.
// /reset forgets the conversation, /quit or end of input leaves.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include <unistd.h>

#include "cli_common.h"
#include "command.h"
#include "tessera/core/error.h"
#include "tessera/pipeline/deployment.h"
#include "tessera/pipeline/manifest.h"
#include "tessera/runtime/conversation.h"

namespace {

namespace fs = std::filesystem;

struct ChatArgs {
  std::string dir, bucket = "exact";
  int64_t max_tokens = 256;
  tessera::runtime::SamplingOptions sampling;
};

void report(const tessera::runtime::TurnResult& t, size_t turn) {
  const auto& g = t.gen;
  double decode_ms = 0;
  for (const auto& d : g.decode) decode_ms += d.predicted_seconds * 1e3;
  std::fprintf(stderr,
               "[turn %zu: %lld prompt tokens appended at position %lld%s; %zu generated (stop: %s); "
               "NPU predicted prefill %.3f ms, decode %.3f ms]\n",
               turn, static_cast<long long>(t.appended), static_cast<long long>(t.start_position),
               t.reprefilled ? " (history prefilled again)" : "", g.tokens.size(),
               tessera::runtime::stop_reason_name(g.stop), g.prefill.predicted_seconds * 1e3, decode_ms);
}

int run(const ChatArgs& a) {
  using namespace tessera;
  runtime::Sampler check(a.sampling);  // validates the options before any loading
  const fs::path dir(a.dir);
  const pipeline::DirLock lock(dir, pipeline::DirLock::Mode::shared, "chat");
  const pipeline::OpenedDeployment d = pipeline::open_deployment(dir, "chat");
  auto tmpl = model::ChatTemplate::from_model(pipeline::deployment_chat_source(dir, "chat"));
  runtime::SessionOptions so = d.session;  // the plans phases 4-6 gated
  so.bucket = runtime::parse_bucket_policy(a.bucket);
  runtime::Session session(d.config, d.weights, d.spec, so);
  runtime::Conversation chat(session, d.tokenizer, tmpl);
  const bool tty = isatty(fileno(stdin)) != 0;
  std::fprintf(stderr, "tessera chat: %s (%s template, context %lld tokens); /reset, /quit\n",
               d.config.name.c_str(), tmpl.format_name(), static_cast<long long>(session.context()));
  runtime::GenerateOptions go;
  go.max_new_tokens = a.max_tokens;
  go.sampling = a.sampling;
  std::string line;
  while (true) {
    if (tty) std::fputs("> ", stderr);
    if (!std::getline(std::cin, line) || line == "/quit") break;
    if (line == "/reset") {
      chat.reset();
      std::fputs("[conversation reset]\n", stderr);
      continue;
    }
    if (line.empty()) continue;
    try {
      const auto t = chat.say(line, go, [](const std::string& piece) {
        std::fputs(piece.c_str(), stdout);
        std::fflush(stdout);
      });
      std::fputs("\n", stdout);
      std::fflush(stdout);
      report(t, chat.turns());
    } catch (const runtime::ContextFullError& e) {
      std::fprintf(stderr, "[%s; /reset to start over]\n", e.what());
    }
  }
  return 0;
}

tessera::cli::Action setup_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  auto* sub = app.add_subcommand("chat", "Interactive multi-turn chat on the modelled NPU from a deployment");
  sub->add_option("dir", a->dir, "Deployment directory (tessera deploy --out)")->required();
  sub->add_option("-n,--max-tokens", a->max_tokens, "Tokens to generate at most per reply")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  tessera::cli::add_sampling_options(sub, a->sampling);
  sub->add_option("--bucket", a->bucket, "Prefill shapes: exact | pow2")->capture_default_str();
  return [a] { return run(*a); };
}
TESSERA_COMMAND("chat", setup_chat);

}  // namespace
