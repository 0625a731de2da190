// cli/main.cc — `baton`: the command-line tool (docs/cli.md).
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace {

using baton::cli::Command;

// `baton run|elect ... -- cmd args...`: everything after the first "--"
// that follows `run` or `elect` is the command, untouched by flag parsing.
std::vector<std::string> split_command(std::vector<std::string>& args) {
  bool seen_command = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "run" || args[i] == "elect") seen_command = true;
    if (args[i] == "--") {
      if (!seen_command) return {};
      std::vector<std::string> tail(args.begin() + static_cast<long>(i) + 1,
                                    args.end());
      args.resize(i);
      return tail;
    }
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  // A closed pipe on stdout must not kill us before we release a lease.
  signal(SIGPIPE, SIG_IGN);

  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> trailing = split_command(args);

  CLI::App app{
      "baton: distributed locks, leases, leader election and counters.\n"
      "Exit codes: 0 ok, 64 usage, 69 store unavailable, 75 not acquired or\n"
      "timed out, 76 lease lost; run/elect pass their command's status on."};
  app.name("baton");
  app.require_subcommand(1);
  app.fallthrough();

  baton::cli::Globals globals;
  app.add_option("--store", globals.store,
                 "Store URL (memory:, baton://host:port, ...)")
      ->envname("BATON_STORE")
      ->capture_default_str();
  app.add_option("--label", globals.label,
                 "Owner label shown by status (default host:pid:program)");

  std::vector<Command> commands;
  commands.push_back(baton::cli::add_run_command(app, globals, trailing));
  commands.push_back(baton::cli::add_acquire_command(app, globals));
  commands.push_back(baton::cli::add_extend_command(app, globals));
  commands.push_back(baton::cli::add_release_command(app, globals));
  commands.push_back(baton::cli::add_status_command(app, globals));
  commands.push_back(baton::cli::add_elect_command(app, globals, trailing));
  commands.push_back(baton::cli::add_counter_command(app, globals));
  commands.push_back(baton::cli::add_bench_command(app, globals));

  // CLI11 wants argv in reverse order for parse(vector).
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "baton: invalid_argument: " << e.what() << "\n"
              << "Run with --help for more information.\n";
    return baton::cli::kExitUsage;
  }
  for (const Command& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return baton::cli::report(baton::Errc::invalid_argument,
                            "no subcommand given");
}
