#include "tessera/serve/server.h"

#include <atomic>
#include <ctime>

#include <httplib.h>

#include "tessera/core/log.h"
#include "tessera/serve/ticket_queue.h"

namespace tessera::serve {

using nlohmann::json;

struct Server::Impl {
  Impl(Engine& e, ServerOptions o) : engine(e), opts(std::move(o)), created(std::time(nullptr)) {}
  Engine& engine;
  ServerOptions opts;
  httplib::Server http;
  TicketQueue queue;
  std::atomic<int64_t> next_id{1};
  int64_t created;
};

namespace {

void set_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

ApiError server_error(const std::exception& e) { return ApiError(500, e.what(), "server_error", "", ""); }

// SSE over httplib's chunked provider. Runs on the connection's thread after
// the handler returned, still holding the request's turn on the Session.
bool stream_events(Engine& engine, const PreparedRequest& p, const ResponseMeta& meta, httplib::DataSink& sink) {
  bool ok = true;
  const auto write = [&](const std::string& ev) {
    ok = ok && sink.is_writable() && sink.write(ev.data(), ev.size());
    return ok;
  };
  bool first = true;
  try {
    const CompletionResult r = engine.run(p, [&](std::string_view piece) {
      // A token that adds no text yet still checks the client is there.
      if (piece.empty() && !first) return ok = ok && sink.is_writable();
      write(sse_event(chunk_json(meta, piece, first, nullptr)));
      first = false;
      return ok;
    });
    if (!ok) {
      log_info("{} {}: client gone, generation stopped", endpoint_path(meta.endpoint), meta.id);
      return false;
    }
    write(sse_event(chunk_json(meta, "", first, &r)));
    log_info("{} {}: stream, {} + {} tokens, NPU predicted {:.3f} ms", endpoint_path(meta.endpoint), meta.id,
             r.prompt_tokens, r.completion_tokens, r.predicted_prefill_ms + r.predicted_decode_ms);
  } catch (const std::exception& e) {
    log_warn("{} {}: {}", endpoint_path(meta.endpoint), meta.id, e.what());
    write(sse_event(error_json(server_error(e))));
  }
  write(sse_done());
  sink.done();
  return ok;
}

void handle_completion(Server::Impl& s, Endpoint ep, const httplib::Request& req, httplib::Response& res) {
  try {
    const CompletionRequest cr = parse_request(ep, req.body);
    const ResponseMeta meta{ep, fmt::format("{}-{}", ep == Endpoint::chat ? "chatcmpl" : "cmpl", s.next_id++),
                            static_cast<int64_t>(std::time(nullptr)), s.engine.model_id()};
    // The turn is taken before prepare() so that the engine (tokenizer
    // included) is only ever used by one request at a time.
    std::shared_ptr<TicketQueue::Turn> turn = s.queue.wait_turn();
    const PreparedRequest p = s.engine.prepare(cr);
    if (!cr.stream) {
      const CompletionResult r = s.engine.run(p, [](std::string_view) { return true; });
      turn.reset();
      set_json(res, 200, response_json(meta, r));
      log_info("{} {}: {} + {} tokens, NPU predicted {:.3f} ms", endpoint_path(ep), meta.id, r.prompt_tokens,
               r.completion_tokens, r.predicted_prefill_ms + r.predicted_decode_ms);
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    // The provider owns the turn: it is released when the stream ends, or when
    // httplib drops the response without streaming it (client already gone).
    res.set_chunked_content_provider("text/event-stream", [&s, turn, p, meta](size_t, httplib::DataSink& sink) mutable {
      const bool ok = stream_events(s.engine, p, meta, sink);
      turn.reset();
      return ok;
    });
  } catch (const ApiError& e) {
    set_json(res, e.status, error_json(e));
  } catch (const std::exception& e) {
    log_warn("{}: {}", endpoint_path(ep), e.what());
    set_json(res, 500, error_json(server_error(e)));
  }
}

// httplib's own refusals (no route, body over the limit) get the same error
// object as the API's.
httplib::Server::HandlerResponse on_error(const Server::Impl& s, const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
  std::string message = fmt::format("HTTP {} for {} {}", res.status, req.method, req.path), code;
  if (res.status == 404) message = fmt::format("no route {} {}", req.method, req.path), code = "not_found";
  if (res.status == 413)
    message = fmt::format("the request body exceeds {} bytes", s.opts.max_body_bytes), code = "payload_too_large";
  set_json(res, res.status, error_json(ApiError(res.status, message, "invalid_request_error", "", code)));
  return httplib::Server::HandlerResponse::Handled;
}

}  // namespace

Server::Server(Engine& engine, ServerOptions opts) : impl_(std::make_unique<Impl>(engine, std::move(opts))) {
  Impl& s = *impl_;
  const int threads = s.opts.threads;
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.http.set_payload_max_length(s.opts.max_body_bytes);
  s.http.Post("/v1/chat/completions", [&s](const httplib::Request& q, httplib::Response& r) {
    handle_completion(s, Endpoint::chat, q, r);
  });
  s.http.Post("/v1/completions", [&s](const httplib::Request& q, httplib::Response& r) {
    handle_completion(s, Endpoint::completion, q, r);
  });
  s.http.Get("/v1/models", [&s](const httplib::Request&, httplib::Response& r) {
    set_json(r, 200, models_json(s.engine.model_id(), s.created));
  });
  s.http.Get("/health", [&s](const httplib::Request&, httplib::Response& r) {
    set_json(r, 200, {{"status", "ok"}, {"model", s.engine.model_id()}, {"queued", s.queue.queued()}});
  });
  s.http.set_error_handler(httplib::Server::HandlerWithResponse(
      [&s](const httplib::Request& q, httplib::Response& r) { return on_error(s, q, r); }));
}

Server::~Server() = default;

int Server::bind() {
  Impl& s = *impl_;
  const int port = s.opts.port == 0 ? s.http.bind_to_any_port(s.opts.host)
                                     : (s.http.bind_to_port(s.opts.host, s.opts.port) ? s.opts.port : -1);
  if (port < 0) throw_error<InputError>("serve: cannot listen on {}:{}", s.opts.host, s.opts.port);
  return port;
}

void Server::listen() { impl_->http.listen_after_bind(); }

void Server::stop() { impl_->http.stop(); }

}  // namespace tessera::serve
