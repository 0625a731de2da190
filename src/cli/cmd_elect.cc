// cli/cmd_elect.cc — `baton elect <group> [flags] -- cmd args...`:
// active-standby (source document 002). Every candidate campaigns; the one
// elected runs the command while its term is renewed every retry interval;
// standbys wait and report leader changes.
#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdlib>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "baton/elector.h"
#include "cli/child.h"
#include "cli/cli.h"
#include "core/duration.h"
#include "core/validate.h"

namespace baton::cli {

namespace {

using std::chrono::milliseconds;

struct ElectFlags {
  std::string group;
  std::vector<std::string> command;
  std::string ttl = "15s";
  std::string retry_interval = "0";
  std::string grace = "10s";
};

// How long to wait for campaign() to return after resign() on a signal.
constexpr milliseconds kResignWait{3'000};

int run_elected(const Globals& globals, const ElectFlags& flags,
                const std::vector<std::string>& trailing) {
  std::vector<std::string> command = flags.command;
  command.insert(command.end(), trailing.begin(), trailing.end());
  if (command.empty()) {
    return report(Errc::invalid_argument,
                  "elect: no command given; usage: baton elect <group> "
                  "[flags] -- command [args...]");
  }
  auto ttl = parse_duration_flag("--ttl", flags.ttl, false);
  if (!ttl) return report(ttl.error());
  auto retry =
      parse_duration_flag("--retry-interval", flags.retry_interval, false);
  if (!retry) return report(retry.error());
  auto grace = parse_duration_flag("--grace", flags.grace, false);
  if (!grace) return report(grace.error());
  for (Status s :
       {core::validate_name(flags.group, "group name"),
        core::validate_ttl(*ttl), core::validate_label(globals.label)}) {
    if (!s) return report(s.error());
  }
  if (*retry >= *ttl) {
    return report(Errc::invalid_argument, "--retry-interval " +
                                              core::format_duration(*retry) +
                                              " must be shorter than --ttl " +
                                              core::format_duration(*ttl));
  }

  auto client = open_client(globals);
  if (!client) return report(client.error());
  const std::string label =
      globals.label.empty() ? client->label() : globals.label;

  std::mutex mu;
  std::string lost_reason;
  ElectorOptions options;
  options.ttl = *ttl;
  options.retry_interval = *retry;
  options.label = globals.label;
  options.on_new_leader = [&flags, label](const std::string& leader) {
    if (leader == label) return;
    std::cerr << "baton: leader of " << flags.group << " is now "
              << (leader.empty() ? "(none)" : leader) << '\n';
  };
  options.on_lost = [&](const Error& e) {
    std::lock_guard<std::mutex> guard(mu);
    lost_reason = e.to_string();
  };
  Elector elector(*client, flags.group, options);

  std::cerr << "baton: campaigning for " << flags.group << " as " << label
            << '\n';
  {
    SignalLatch latch;
    auto campaign = std::async(std::launch::async,
                               [&elector] { return elector.campaign(); });
    while (campaign.wait_for(milliseconds(100)) != std::future_status::ready) {
      if (int sig = latch.signal(); sig != 0) {
        (void)elector.resign();
        if (campaign.wait_for(kResignWait) != std::future_status::ready) {
          std::cerr << "baton: campaign did not stop after resign; exiting\n";
          std::_Exit(128 + sig);
        }
        (void)campaign.get();
        (void)elector.resign();
        return 128 + sig;
      }
    }
    Status won = campaign.get();
    if (!won) return report(won.error());
  }

  auto lease = elector.lease();
  std::uint64_t fencing = lease ? lease->fencing_token : 0;
  std::cerr << "baton: elected leader of " << flags.group << " (fencing "
            << fencing << ")\n";

  SuperviseOptions supervise_options;
  supervise_options.argv = command;
  supervise_options.env = {
      {"BATON_LOCK", flags.group},
      {"BATON_FENCING_TOKEN", std::to_string(fencing)},
      {"BATON_OWNER_LABEL", label},
      {"BATON_STORE", globals.store},
  };
  if (lease) {
    supervise_options.env.emplace_back("BATON_OWNER_TOKEN",
                                       lease->token.to_string());
  }
  supervise_options.stop = &elector.cancelled();
  supervise_options.grace = *grace;
  supervise_options.on_stop = [&] {
    std::string reason;
    {
      std::lock_guard<std::mutex> guard(mu);
      reason = lost_reason.empty() ? "renewal failed" : lost_reason;
    }
    report(Errc::lock_lost,
           "leadership of " + flags.group + " lost (" + reason +
               "); stopping the command (SIGTERM, then SIGKILL after " +
               core::format_duration(*grace) + ")");
  };

  int spawn_exit = 0;
  auto outcome = supervise(supervise_options, &spawn_exit);
  if (!outcome) {
    report(outcome.error());
    (void)elector.resign();
    return spawn_exit;
  }
  if (outcome->stopped) return kExitLeaseLost;
  (void)elector.resign();
  return outcome->exit_code;
}

}  // namespace

Command add_elect_command(CLI::App& app, const Globals& globals,
                          const std::vector<std::string>& trailing) {
  auto flags = std::make_shared<ElectFlags>();
  CLI::App* sub = app.add_subcommand(
      "elect",
      "Active-standby: campaign for <group>; when elected, run the command "
      "(with BATON_FENCING_TOKEN = the term). Exit 76 if leadership is lost.");
  sub->add_option("group", flags->group, "Election group (a lock name)")
      ->required();
  sub->add_option("command", flags->command,
                  "Command and arguments (put them after \"--\")");
  sub->add_option("--ttl", flags->ttl, "Leader lease TTL")
      ->capture_default_str();
  sub->add_option("--retry-interval", flags->retry_interval,
                  "Renew / re-check interval (0 = TTL/3)")
      ->capture_default_str();
  sub->add_option("--grace", flags->grace,
                  "After leadership is lost: time between SIGTERM and SIGKILL")
      ->capture_default_str();
  return {sub, [flags, &globals, &trailing] {
            return run_elected(globals, *flags, trailing);
          }};
}

}  // namespace baton::cli
