// The only place that catches tessera errors, prints, and chooses exit codes.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <limits>

#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "command.h"
#include "tessera/core/error.h"
#include "tessera/core/log.h"

namespace tessera::cli {
std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> r;
  return r;
}
}  // namespace tessera::cli

namespace {

void install_sinks(bool verbose) {
  tessera::set_log_sink([verbose](tessera::LogLevel lvl, const std::string& msg) {
    if (lvl == tessera::LogLevel::debug && !verbose) return;
    const char* tag = lvl == tessera::LogLevel::warn ? "warning: " : "";
    std::fprintf(stderr, "%s%s\n", tag, msg.c_str());
  });
  // A bar redrawn with \r only makes sense on a terminal; a log file or a CI
  // capture gets one line per finished step instead of one per unit.
  const bool tty = isatty(fileno(stderr)) != 0;
  tessera::set_progress_sink([tty](const std::string& step, size_t done, size_t total) {
    if (total == 0) return;
    if (!tty) {
      if (done >= total) std::fprintf(stderr, "%s: %zu/%zu done\n", step.c_str(), done, total);
      return;
    }
    int width = 30, filled = static_cast<int>(width * done / total);
    std::fprintf(stderr, "\r%-28s [%s%s] %zu/%zu", step.c_str(), std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), done, total);
    if (done >= total) std::fputc('\n', stderr);
  });
}

}  // namespace

// The simulator allocates and frees the same large host, L1 and L2 buffers
// for every dispatch. glibc's defaults hand blocks over 128 KiB back to the
// kernel on free, so each dispatch paid page faults and page clearing again
// (a quarter of a decode token's host time). Keeping freed memory in the heap
// cut host time per decode token 2.4x at the same peak RSS (llama-3.2-1b,
// 2 layers, `tessera run -n 8`: 1.17 -> 0.49 s; 3.1 GB peak either way).
void tune_allocator() {
#ifdef __GLIBC__
  // Both are needed: a high mmap threshold alone still trims the heap top on
  // free, a high trim threshold alone still maps the big blocks afresh.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  mallopt(M_TOP_PAD, 64 << 20);
#endif
}

int main(int argc, char** argv) {
  tune_allocator();
  CLI::App app{"tessera: deploy decoder-only LLMs onto spatial NPUs, proven step by step"};
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Print debug messages");
  auto& reg = tessera::cli::command_registry();
  std::sort(reg.begin(), reg.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::vector<std::pair<CLI::App*, tessera::cli::Action>> actions;
  for (auto& entry : reg) {
    size_t before = app.get_subcommands({}).size();
    tessera::cli::Action act = entry.setup(app);
    auto subs = app.get_subcommands({});
    if (subs.size() > before) actions.emplace_back(subs.back(), std::move(act));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, like every other error (CLI11's own exit() adds a second one).
    std::fprintf(stderr, "tessera: usage error: %s (see --help)\n", e.what());
    return static_cast<int>(tessera::ErrorCategory::usage);
  }
  install_sinks(verbose);
  try {
    for (auto& [sub, act] : actions)
      if (sub->parsed()) return act();
    return static_cast<int>(tessera::ErrorCategory::usage);
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "\ntessera: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "\ntessera: error: out of memory\n");
    return static_cast<int>(tessera::ErrorCategory::internal);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\ntessera: internal error: %s\n", e.what());
    return static_cast<int>(tessera::ErrorCategory::internal);
  }
}
