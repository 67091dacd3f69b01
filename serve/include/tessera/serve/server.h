#pragma once
// tessera serve's HTTP side (cpp-httplib): routes, body limits, SSE streaming
// and the arrival-order queue onto the one Engine. Everything a request can get
// wrong is decided in api.h / engine.h; this file only moves bytes.
//
//   POST /v1/chat/completions, POST /v1/completions   (stream: true -> SSE)
//   GET  /v1/models, GET /health
//
// A streaming client that disconnects stops its generation at the next token
// (the chunk write fails). A non-streaming request runs to its end: HTTP/1.1
// gives no sign of a vanished client until the response is written.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tessera/serve/engine.h"

namespace tessera::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (bind() returns it)
  size_t max_body_bytes = size_t{1} << 20;  // larger bodies: 413 with an error object
  int threads = 16;  // connections handled at once (requests beyond wait for a thread)
};

class Server {
 public:
  Server(Engine& engine, ServerOptions opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the socket; returns the port. InputError when the address cannot be bound.
  int bind();
  // Serves until stop(); call after bind().
  void listen();
  // Thread-safe; makes listen() return.
  void stop();

  struct Impl;  // httplib stays out of this header

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::serve
