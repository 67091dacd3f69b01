#pragma once
// Subcommands register themselves here, one file each, so adding a command never
// means editing main.cpp. Each setup function adds a subcommand to the app and
// returns the action to run when it is chosen; actions return an exit code.
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace tessera::cli {

using Action = std::function<int()>;
using CommandSetup = std::function<Action(CLI::App& app)>;

struct CommandEntry {
  std::string name;
  CommandSetup setup;
};

std::vector<CommandEntry>& command_registry();

struct RegisterCommand {
  RegisterCommand(std::string name, CommandSetup setup) {
    command_registry().push_back({std::move(name), std::move(setup)});
  }
};

}  // namespace tessera::cli

#define TESSERA_CLI_CONCAT2(a, b) a##b
#define TESSERA_CLI_CONCAT(a, b) TESSERA_CLI_CONCAT2(a, b)
#define TESSERA_COMMAND(name, fn) \
  static ::tessera::cli::RegisterCommand TESSERA_CLI_CONCAT(reg_cmd_, __COUNTER__)(name, fn)
