#include "tessera/core/log.h"

#include <mutex>

namespace tessera {
namespace {
std::mutex g_mu;
LogSink g_log;
ProgressSink g_progress;
}  // namespace

void set_log_sink(LogSink sink) {
  std::lock_guard lk(g_mu);
  g_log = std::move(sink);
}

void log_message(LogLevel level, const std::string& msg) {
  std::lock_guard lk(g_mu);
  if (g_log) g_log(level, msg);
}

void set_progress_sink(ProgressSink sink) {
  std::lock_guard lk(g_mu);
  g_progress = std::move(sink);
}

void report_progress(const std::string& step, size_t done, size_t total) {
  std::lock_guard lk(g_mu);
  if (g_progress) g_progress(step, done, total);
}

}  // namespace tessera
