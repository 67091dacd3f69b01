#pragma once
// Library code reports progress and diagnostics through a sink that the CLI
// installs; by default nothing is printed (library code never writes to stdout).
#include <functional>
#include <string>

#include <fmt/format.h>

namespace tessera {

enum class LogLevel { debug, info, warn };

using LogSink = std::function<void(LogLevel, const std::string&)>;
void set_log_sink(LogSink sink);
void log_message(LogLevel level, const std::string& msg);

template <class... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  log_message(LogLevel::info, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
  log_message(LogLevel::warn, fmt::format(f, std::forward<Args>(args)...));
}

// Progress of a long step (done of total units); the CLI draws a bar.
using ProgressSink = std::function<void(const std::string& step, size_t done, size_t total)>;
void set_progress_sink(ProgressSink sink);
void report_progress(const std::string& step, size_t done, size_t total);

}  // namespace tessera
