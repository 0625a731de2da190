// cli/main.cc — `baton`: the command-line tool (docs/cli.md).
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "baton/duration.h"
#include "baton/version.h"
#include "cli/cli.h"
#include "cli/config.h"

// The commit this program was built from (cmake/BatonBuildCommit.cmake).
extern const char baton_build_commit[];

namespace {

using baton::cli::Command;

// `baton --version`: the version, the commit of the build and the store
// schemes compiled in.
std::string version_text() {
  std::string text = "baton " + std::string(baton::version()) + "\ncommit " +
                     baton_build_commit + "\nstores:";
  for (const std::string& scheme : baton::store_schemes()) {
    text += " " + scheme;
  }
  return text;
}

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

// The --config FILE (or --config=FILE) on the command line (before or
// after the subcommand; `args` no longer holds run's command), else
// BATON_CONFIG; "" if neither.
std::string config_path(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--config" && i + 1 < args.size()) return args[i + 1];
    if (a.rfind("--config=", 0) == 0) return a.substr(9);
  }
  const char* env = std::getenv("BATON_CONFIG");
  return env == nullptr ? "" : env;
}

// Adds `flag value` right after the subcommand if it is one of `commands`
// and the flag is not on the command line already (flags win over the file).
void default_flag(std::vector<std::string>& args,
                  std::initializer_list<const char*> commands,
                  const std::string& flag, const std::string& value) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--store" || a == "--label" || a == "--config" ||
        a == "--timeout") {
      ++i;
      continue;
    }
    if (a.empty() || a[0] == '-') continue;
    bool wanted = false;
    for (const char* c : commands) wanted = wanted || a == c;
    if (!wanted) return;
    for (std::size_t j = i + 1; j < args.size(); ++j) {
      if (args[j] == flag || args[j].rfind(flag + "=", 0) == 0) return;
    }
    args.insert(args.begin() + static_cast<long>(i) + 1, {flag, value});
    return;
  }
}

// The subcommand named on the command line ("run", "status", ...), or "".
std::string subcommand_of(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--store" || a == "--label" || a == "--config" ||
        a == "--timeout") {
      ++i;
      continue;
    }
    if (a.empty() || a[0] == '-') continue;
    return a;
  }
  return "";
}

constexpr const char* kHelpFooter = R"(Examples:
  baton run nightly --ttl 1m -- ./etl --date today
  baton run gpu --capacity 4 --wait 10m -- python train.py
  baton acquire deploy --ttl 10m          # prints token=... fencing=...
  baton status --json
  baton elect billing --ttl 15s -- ./billing-scheduler
  baton leader billing --watch            # each change of leader
  baton run nightly --hold-at-least 20h -- ./etl   # once per 20 h, any host
  baton --store memory: run demo -- env
  baton stores postgres                   # its URL and every URL option

Durations: 500ms, 30s, 2m, 1h, 7d, 1m30s (a number needs a unit; 0 is
fine); --wait also takes "forever".

Exit codes:
  0    ok
  1    release: the lease was no longer held
  64   usage: bad flag, argument or store URL
  69   store unavailable, or no answer within --timeout
  70   internal error
  75   not acquired, or --wait timed out
  76   lease or leadership lost (run/elect stopped the command)
  77   permission denied
  124  run: the command was stopped by --max-runtime
  126  run/elect: the command cannot be executed
  127  run/elect: the command was not found
  run/elect otherwise exit with the command's status (128+N: signal N).
Full documentation: docs/cli.md)";

}  // namespace

int main(int argc, char** argv) {
  // A closed pipe on stdout must not kill us before we release a lease.
  signal(SIGPIPE, SIG_IGN);

  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> trailing = split_command(args);

  CLI::App app{
      "baton: distributed locks, leases, leader election and counters."};
  app.name("baton");
  app.footer(kHelpFooter);
  app.require_subcommand(1);
  app.fallthrough();
  app.set_version_flag("--version", version_text(),
                       "Print the version, the commit it was built from and "
                       "the store schemes compiled in, and exit");

  baton::cli::Globals globals;
  // Defaults from the YAML config file (cli/config.h); flags and
  // BATON_STORE still win.
  std::optional<baton::cli::CliConfig> config;
  if (const std::string path = config_path(args); !path.empty()) {
    auto c = baton::cli::load_cli_config(path);
    if (!c.ok()) return baton::cli::report(c.error());
    config = std::move(*c);
    if (config->store) globals.store = *config->store;
    if (config->label) globals.label = *config->label;
    globals.retry_interval = config->retry_interval;
    if (config->timeout) {
      globals.timeout_text = baton::format_duration(*config->timeout);
    }
    if (config->ttl) {
      default_flag(args, {"run", "acquire", "extend", "elect"}, "--ttl",
                   std::to_string(config->ttl->count()) + "ms");
    }
    if (config->retry_interval) {
      default_flag(args, {"elect"}, "--retry-interval",
                   std::to_string(config->retry_interval->count()) + "ms");
    }
    if (config->metrics_file) {
      default_flag(args, {"run", "elect"}, "--metrics-file",
                   *config->metrics_file);
    }
    if (config->events) {
      default_flag(args, {"run", "elect"}, "--events", *config->events);
    }
  }
  std::string config_flag;
  app.add_option("--config", config_flag,
                 "YAML config: Store, Label, TTL, RetryInterval, Timeout, "
                 "MetricsFile, Events and the postgres:// pool settings "
                 "(docs/cli.md)")
      ->envname("BATON_CONFIG");
  app.add_option("--store", globals.store,
                 "Store URL (memory:, baton://host:port, ...)")
      ->envname("BATON_STORE")
      ->capture_default_str();
  app.add_option("--label", globals.label,
                 "Owner label shown by status (default host:pid:program)");
  app.add_option("--timeout", globals.timeout_text,
                 "How long one store call may go unanswered; every command "
                 "ends within its --wait plus this (config key Timeout)")
      ->capture_default_str();

  std::vector<Command> commands;
  commands.push_back(baton::cli::add_run_command(app, globals, trailing));
  commands.push_back(baton::cli::add_acquire_command(app, globals));
  commands.push_back(baton::cli::add_extend_command(app, globals));
  commands.push_back(baton::cli::add_release_command(app, globals));
  commands.push_back(baton::cli::add_status_command(app, globals));
  commands.push_back(baton::cli::add_elect_command(app, globals, trailing));
  commands.push_back(baton::cli::add_leader_command(app, globals));
  commands.push_back(baton::cli::add_counter_command(app, globals));
  commands.push_back(baton::cli::add_bench_command(app, globals));
  commands.push_back(baton::cli::add_stores_command(app));

  // CLI11 wants argv in reverse order for parse(vector).
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "baton: invalid_argument: " << e.what() << "\n";
    const std::string sub = subcommand_of(args);
    if ((sub == "run" || sub == "elect") && trailing.empty()) {
      // `baton run m sh -c "echo hi"`: the command's own flags were read
      // as baton's.
      std::cerr << "  put the command after \"--\": baton " << sub << " <"
                << (sub == "run" ? "lock" : "group")
                << "> [flags] -- command [args...]\n";
    }
    std::cerr << "Run with --help for more information.\n";
    return baton::cli::kExitUsage;
  }
  {
    auto timeout = baton::cli::parse_duration_flag("--timeout",
                                                   globals.timeout_text, false);
    if (!timeout) return baton::cli::report(timeout.error());
    if (*timeout <= std::chrono::milliseconds::zero()) {
      return baton::cli::report(baton::Errc::invalid_argument,
                                "--timeout must be more than 0");
    }
    globals.timeout = *timeout;
  }
  if (config) {
    auto url = baton::cli::store_url_with_pool(*config, globals.store);
    if (!url.ok()) return baton::cli::report(url.error());
    globals.store = *url;
  }
  for (const Command& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return baton::cli::report(baton::Errc::invalid_argument,
                            "no subcommand given");
}
