// cli/cmd_run.cc — `baton run <lock> [flags] -- cmd args...`: hold a lock
// (renewed by a LeaseKeeper) while a command runs.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "baton/keeper.h"
#include "cli/child.h"
#include "cli/cli.h"
#include "core/duration.h"
#include "core/validate.h"

namespace baton::cli {

namespace {

using std::chrono::milliseconds;

struct RunFlags {
  std::string lock;
  std::vector<std::string> command;
  std::string ttl = "30s";
  std::string wait = "0";
  std::uint32_t capacity = 1;
  std::string grace = "10s";
};

// "3rd in line for X (waited 12s), held by Y (18s left)".
std::string progress_line(const LockInfo& info, const std::string& lock,
                          const std::string& label) {
  std::string line = "waiting: ";
  std::size_t position = 0;
  milliseconds waited{0};
  for (std::size_t i = 0; i < info.waiters.size(); ++i) {
    if (info.waiters[i].label == label) {
      position = i + 1;
      waited = info.waiters[i].waited;
      break;
    }
  }
  if (position > 0) {
    line += ordinal(position) + " in line for " + lock + " (waited " +
            format_human(waited) + ")";
  } else {
    line += "for " + lock;
  }
  if (!info.holders.empty()) {
    const HolderInfo& h = info.holders.front();
    line += ", held by " + (h.label.empty() ? std::string("?") : h.label);
    if (info.holders.size() > 1) {
      line += " and " + std::to_string(info.holders.size() - 1) + " more";
    } else {
      line += " (" + format_human(h.time_left) + " left)";
    }
  }
  return line;
}

// Acquires with a LeaseKeeper. While waiting with stderr on a terminal,
// a second thread asks describe() every second and shows our place in the
// queue. The acquire itself is one blocking request, so the FIFO place is
// never given up.
Result<LeaseKeeper> acquire_with_progress(const Client& client,
                                          const std::string& lock,
                                          milliseconds wait,
                                          const AcquireOptions& acquire_options,
                                          const KeeperOptions& keeper_options,
                                          const std::string& label) {
  auto attempt = [&] {
    return LeaseKeeper::acquire(client, lock, wait, acquire_options,
                                keeper_options);
  };
  if (wait == milliseconds::zero() || !isatty(STDERR_FILENO)) {
    return attempt();
  }
  auto pending = std::async(std::launch::async, attempt);
  bool shown = false;
  while (pending.wait_for(std::chrono::seconds(1)) !=
         std::future_status::ready) {
    auto info = client.describe(lock);
    if (!info) continue;
    std::cerr << "\r\033[K" << progress_line(*info, lock, label) << std::flush;
    shown = true;
  }
  if (shown) std::cerr << "\r\033[K" << std::flush;
  return pending.get();
}

int run_locked(const Globals& globals, const RunFlags& flags,
               const std::vector<std::string>& trailing) {
  std::vector<std::string> command = flags.command;
  command.insert(command.end(), trailing.begin(), trailing.end());
  if (command.empty()) {
    return report(Errc::invalid_argument,
                  "run: no command given; usage: baton run <lock> [flags] -- "
                  "command [args...]");
  }
  auto parsed = parse_lock_flags(globals, flags.lock, flags.ttl, flags.wait,
                                 flags.capacity);
  if (!parsed) return report(parsed.error());
  auto grace = parse_duration_flag("--grace", flags.grace, false);
  if (!grace) return report(grace.error());

  auto client = open_client(globals);
  if (!client) return report(client.error());
  const std::string label =
      globals.label.empty() ? client->label() : globals.label;

  AcquireOptions acquire_options;
  acquire_options.ttl = parsed->ttl;
  acquire_options.capacity = flags.capacity;
  acquire_options.label = globals.label;
  acquire_options.token = OwnerToken::random();

  // Declared before the keeper: its on_lost callback writes them.
  std::atomic<bool> lost{false};
  std::mutex lost_mu;
  std::string lost_reason;
  KeeperOptions keeper_options;
  keeper_options.on_lost = [&](const Error& e) {
    {
      std::lock_guard<std::mutex> guard(lost_mu);
      lost_reason = e.to_string();
    }
    lost.store(true);
  };

  auto keeper = acquire_with_progress(*client, flags.lock, parsed->wait,
                                      acquire_options, keeper_options, label);
  if (!keeper) return report(keeper.error());

  Lease lease = keeper->lease();
  SuperviseOptions supervise_options;
  supervise_options.argv = command;
  supervise_options.env = {
      {"BATON_LOCK", flags.lock},
      {"BATON_FENCING_TOKEN", std::to_string(lease.fencing_token)},
      {"BATON_OWNER_LABEL", label},
      {"BATON_OWNER_TOKEN", lease.token.to_string()},
      {"BATON_STORE", globals.store},
  };
  supervise_options.stop = &lost;
  supervise_options.grace = *grace;
  supervise_options.on_stop = [&] {
    std::string reason;
    {
      std::lock_guard<std::mutex> guard(lost_mu);
      reason = lost_reason;
    }
    report(Errc::lock_lost,
           "lease on " + flags.lock + " lost (" + reason +
               "); stopping the command (SIGTERM, then SIGKILL after " +
               core::format_duration(*grace) + ")");
  };

  int spawn_exit = 0;
  auto outcome = supervise(supervise_options, &spawn_exit);
  if (!outcome) {
    report(outcome.error());
    (void)keeper->release();
    return spawn_exit;
  }
  if (outcome->stopped) return kExitLeaseLost;
  (void)keeper->release();
  return outcome->exit_code;
}

}  // namespace

Command add_run_command(CLI::App& app, const Globals& globals,
                        const std::vector<std::string>& trailing) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* sub = app.add_subcommand(
      "run",
      "Hold <lock> while a command runs (renewed every TTL/3). The command "
      "gets BATON_LOCK, BATON_FENCING_TOKEN, BATON_OWNER_LABEL, "
      "BATON_OWNER_TOKEN and BATON_STORE.");
  sub->add_option("lock", flags->lock, "Lock name")->required();
  sub->add_option("command", flags->command,
                  "Command and arguments (put them after \"--\")");
  sub->add_option("--ttl", flags->ttl, "Lease TTL")->capture_default_str();
  sub->add_option("--wait", flags->wait,
                  "How long to wait for the lock: 0 (try once), a duration "
                  "or \"forever\"")
      ->capture_default_str();
  sub->add_option("--capacity", flags->capacity,
                  "Holders allowed at once (1 = mutex)")
      ->capture_default_str();
  sub->add_option("--grace", flags->grace,
                  "After the lease is lost: time between SIGTERM and SIGKILL")
      ->capture_default_str();
  return {sub, [flags, &globals, &trailing] {
            return run_locked(globals, *flags, trailing);
          }};
}

}  // namespace baton::cli
