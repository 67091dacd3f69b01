// tessera serve: an OpenAI-compatible HTTP server (serve/) over one runtime
// Session on a deployment directory. The deployment is opened and verified
// exactly as `tessera run` does; requests take turns on the one modelled NPU in
// arrival order. SIGINT / SIGTERM stop it cleanly.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

#include "command.h"
#include "tessera/core/error.h"
#include "tessera/core/log.h"
#include "tessera/pipeline/deployment.h"
#include "tessera/pipeline/manifest.h"
#include "tessera/serve/server.h"

namespace {

namespace fs = std::filesystem;

int g_stop_pipe[2] = {-1, -1};

extern "C" void on_signal(int) {
  const char c = 's';
  [[maybe_unused]] const ssize_t n = write(g_stop_pipe[1], &c, 1);  // async-signal-safe
}

struct ServeArgs {
  std::string dir, bucket = "exact", model_name;
  tessera::serve::ServerOptions server;
  int64_t chat_max_tokens = 256;
};

// The chat template, or why there is none: chat requests then get a 400
// saying so, and completions still work.
std::optional<tessera::model::ChatTemplate> chat_template(const fs::path& dir, std::string& why_not) {
  using namespace tessera;
  try {
    return model::ChatTemplate::from_model(pipeline::deployment_chat_source(dir, "serve"));
  } catch (const InputError& e) {
    why_not = e.what();
    log_warn("{}; /v1/chat/completions will refuse requests", why_not);
    return std::nullopt;
  }
}

int run(const ServeArgs& a) {
  using namespace tessera;
  const fs::path dir(a.dir);
  const pipeline::DirLock lock(dir, pipeline::DirLock::Mode::shared, "serve");  // no deploy writing meanwhile
  pipeline::OpenedDeployment d = pipeline::open_deployment(dir, "serve");
  std::string no_chat;
  auto tmpl = chat_template(dir, no_chat);
  const std::string id = a.model_name.empty() ? d.config.name : a.model_name;
  serve::EngineOptions eo;
  eo.default_chat_max_tokens = a.chat_max_tokens;
  eo.session = d.session;  // the plans phases 4-6 gated
  eo.session.bucket = runtime::parse_bucket_policy(a.bucket);
  serve::Engine engine(std::move(d), std::move(tmpl), no_chat, id, eo);
  serve::Server server(engine, a.server);

  // SIGINT / SIGTERM may land on any thread (OpenBLAS and the executor
  // start their own), so the handler only writes to a pipe; one thread
  // waits on it and stops the server outside signal context.
  if (pipe(g_stop_pipe) != 0) throw_error<InternalError>("serve: cannot create a pipe");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const int port = server.bind();
  std::thread waiter([&] {
    char c = 0;
    while (read(g_stop_pipe[0], &c, 1) < 0 && errno == EINTR) {
    }
    server.stop();
  });
  std::printf("tessera serve: %s on http://%s:%d (context %lld tokens; POST /v1/chat/completions, "
              "/v1/completions; GET /v1/models, /health)\n",
              id.c_str(), a.server.host.c_str(), port, static_cast<long long>(engine.context()));
  std::fflush(stdout);
  server.listen();
  on_signal(0);  // wakes the waiter if listen ended on its own
  waiter.join();
  std::printf("tessera serve: stopped\n");
  return 0;
}

tessera::cli::Action setup_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* sub = app.add_subcommand("serve", "OpenAI-compatible HTTP server over a deployment (one modelled NPU)");
  sub->add_option("dir", a->dir, "Deployment directory (tessera deploy --out)")->required();
  sub->add_option("--host", a->server.host, "Address to listen on")->capture_default_str();
  sub->add_option("--port", a->server.port, "Port (0: any free port, printed on startup)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  sub->add_option("--max-body", a->server.max_body_bytes, "Largest request body in bytes (larger: 413)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--threads", a->server.threads, "Connections handled at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  sub->add_option("--chat-max-tokens", a->chat_max_tokens, "max_tokens of a chat request that gives none")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--model-name", a->model_name, "Model id clients use (default: the deployment's model)");
  sub->add_option("--bucket", a->bucket, "Prefill shapes: exact | pow2")->capture_default_str();
  return [a] { return run(*a); };
}
TESSERA_COMMAND("serve", setup_serve);

}  // namespace
