#include <fmt/format.h>

#include "command.h"

namespace {
tessera::cli::Action setup_version(CLI::App& app) {
  app.add_subcommand("version", "Print the tessera version");
  return [] {
    fmt::print("tessera 0.1.0\n");
    return 0;
  };
}
TESSERA_COMMAND("version", setup_version);
}  // namespace
