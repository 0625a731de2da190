// cli/cmd_elect.cc — `baton elect <group> [flags] -- cmd args...`:
// active-standby leader election. Every candidate campaigns; the one
// elected runs the command while its term is renewed every retry interval;
// standbys wait and report leader changes.
#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdlib>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/duration.h"
#include "baton/elector.h"
#include "baton/validate.h"
#include "cli/child.h"
#include "cli/cli.h"
#include "cli/observe.h"

namespace baton::cli {

namespace {

using std::chrono::milliseconds;

struct ElectFlags {
  std::string group;
  std::vector<std::string> command;
  std::string ttl = "15s";
  std::string retry_interval = "0";
  std::string grace = "auto";
  ObserveFlags observe;  // --metrics-file, --events
};

// How long to wait for campaign() to return after resign() on a signal.
constexpr milliseconds kResignWait{3'000};

// The checked flags of one `baton elect`.
struct ElectPlan {
  std::vector<std::string> command;  // the command and its arguments
  std::string path;                  // command[0], resolved
  milliseconds ttl{0};
  milliseconds retry{0};  // --retry-interval (0: the elector's default)
  milliseconds grace{0};  // from --grace against --ttl; fitted once elected
};

// Checks the flags and the command before anything touches the store:
// kExitOk with `plan` filled, else the exit code of the problem reported.
int plan_election(const Globals& globals, const ElectFlags& flags,
                  const std::vector<std::string>& trailing, ElectPlan* plan) {
  plan->command = flags.command;
  plan->command.insert(plan->command.end(), trailing.begin(), trailing.end());
  if (plan->command.empty()) {
    return report(Errc::invalid_argument,
                  "elect: no command given; usage: baton elect <group> "
                  "[flags] -- command [args...]");
  }
  auto ttl = parse_duration_flag("--ttl", flags.ttl, false);
  if (!ttl) return report(ttl.error());
  auto retry =
      parse_duration_flag("--retry-interval", flags.retry_interval, false);
  if (!retry) return report(retry.error());
  for (Status s : {validate_lock_name(flags.group, "group name"),
                   validate_ttl(*ttl), validate_label(globals.label)}) {
    if (!s) return report(s.error());
  }
  if (*retry >= *ttl) {
    return report(Errc::invalid_argument,
                  "--retry-interval " + format_duration(*retry) +
                      " must be shorter than --ttl " + format_duration(*ttl));
  }
  const milliseconds renew_interval = *retry > milliseconds::zero()
                                          ? *retry
                                          : std::max(milliseconds(1), *ttl / 3);
  auto grace = parse_grace(flags.grace, *ttl, renew_interval);
  if (!grace) return report(grace.error());
  int not_runnable = 0;
  auto path = resolve_command(plan->command[0], &not_runnable);
  if (!path) return report_cannot_run(path.error(), not_runnable);
  plan->path = std::move(path).value();
  plan->ttl = *ttl;
  plan->retry = *retry;
  plan->grace = *grace;
  return kExitOk;
}

// The elector's options: leader changes reported on stderr (except our
// own), a loss goes to `lost`, each renewal's deadline to `deadlines`.
// `lost` and `deadlines` outlive the elector.
ElectorOptions elector_options(const Globals& globals, const ElectFlags& flags,
                               const ElectPlan& plan, const std::string& label,
                               StopNotice& lost, DeadlineChannel& deadlines) {
  ElectorOptions options;
  options.ttl = plan.ttl;
  options.retry_interval = plan.retry;
  options.label = globals.label;
  options.on_new_leader = [&flags, label](const std::string& leader) {
    if (leader == label) return;
    std::cerr << "baton: leader of " << flags.group << " is now "
              << (leader.empty() ? "(none)" : leader) << '\n';
  };
  options.on_lost = [&lost](const Error& e) { lost.notify(e.to_string()); };
  options.on_renewed = [&deadlines](const Lease& renewed) {
    deadlines.renewed(renewed.local_deadline);
  };
  return options;
}

// Campaigns until elected: kExitOk. A failed campaign is reported; a
// signal resigns (bounded by the store timeout; if the campaign does not
// stop within kResignWait the process exits at once) and exits 128 + N.
int campaign_until_elected(const Globals& globals,
                           std::optional<Elector>& elector) {
  SignalLatch latch;
  auto campaign = std::async(std::launch::async,
                             [&elector] { return elector->campaign(); });
  while (campaign.wait_for(milliseconds(100)) != std::future_status::ready) {
    if (int sig = latch.signal(); sig != 0) {
      (void)elector->resign();
      if (campaign.wait_for(kResignWait) != std::future_status::ready) {
        std::cerr << "baton: campaign did not stop after resign; exiting\n";
        std::_Exit(128 + sig);
      }
      (void)campaign.get();
      StoreDeadline bound(globals, milliseconds::zero(), "", 128 + sig);
      (void)elector->resign();
      elector.reset();
      return 128 + sig;
    }
  }
  Status won = campaign.get();
  if (!won) return report(won.error());
  return kExitOk;
}

// Resigns and destroys the elector within the store timeout (else the
// process exits with `exit_code`: the term ends by its TTL).
void resign_bounded(const Globals& globals, const std::string& group,
                    std::optional<Elector>& elector, int exit_code) {
  StoreDeadline bound(
      globals, milliseconds::zero(),
      "leadership of " + group + " was not resigned; it ends by its TTL",
      exit_code);
  (void)elector->resign();
  elector.reset();
}

// The command's supervision during the term: its environment names the
// group, the term's fencing token and owner; it is stopped (SIGTERM,
// then SIGKILL) by the term's safe deadline or on `lost`; the loss is
// reported with `plan.grace` as it is then (lead() fits it after this). The
// deadline read after the term ended is the last one the elector reported,
// kept in `last_deadline` (which outlives supervision).
SuperviseOptions supervise_options(const Globals& globals,
                                   const ElectFlags& flags,
                                   const ElectPlan& plan,
                                   const std::string& label, Elector& elector,
                                   StopNotice& lost, DeadlineChannel& deadlines,
                                   SteadyTime& last_deadline) {
  auto lease = elector.lease();
  const std::uint64_t fencing = lease ? lease->fencing_token : 0;
  std::cerr << "baton: elected leader of " << flags.group << " (fencing "
            << fencing << ")\n";
  SuperviseOptions options;
  options.argv = plan.command;
  options.path = plan.path;
  options.env = {
      {"BATON_LOCK", flags.group},
      {"BATON_FENCING_TOKEN", std::to_string(fencing)},
      {"BATON_OWNER_LABEL", label},
      {"BATON_STORE", globals.store},
  };
  if (lease) {
    options.env.emplace_back("BATON_OWNER_TOKEN", lease->token.to_string());
  }
  last_deadline = elector.safe_deadline();
  options.deadline = [&elector, &last_deadline] {
    if (const SteadyTime d = elector.safe_deadline(); d != SteadyTime{}) {
      last_deadline = d;
    }
    return last_deadline;
  };
  options.notice = &lost;
  options.stop = &elector.cancelled();
  options.channel = &deadlines;
  options.grace = plan.grace;
  options.on_stop = [&flags, &plan](const StopEvent& event) {
    report(Errc::lock_lost,
           describe_stop("leadership of " + flags.group, event, plan.grace));
  };
  return options;
}

// Elected: runs the command for the term, then resigns. Exits 76 at once
// if leadership was lost (before the start, or while it ran).
int lead(const Globals& globals, const ElectFlags& flags, ElectPlan& plan,
         const std::string& label, std::optional<Elector>& elector,
         StopNotice& lost, DeadlineChannel& deadlines) {
  SteadyTime last_deadline{};
  SuperviseOptions options = supervise_options(
      globals, flags, plan, label, *elector, lost, deadlines, last_deadline);
  // The grace against what the store granted (it may be less than --ttl).
  auto grace = fit_grace(flags.grace, plan.grace, plan.ttl, plan.retry,
                         elector->safe_deadline(), globals.store);
  if (!grace) {
    report(grace.error());
    resign_bounded(globals, flags.group, elector, kExitUsage);
    return kExitUsage;
  }
  plan.grace = *grace;
  options.grace = *grace;
  int spawn_exit = 0;
  auto outcome = supervise(options, &spawn_exit);
  if (!outcome) {
    report_cannot_run(outcome.error(), spawn_exit);
    resign_bounded(globals, flags.group, elector, spawn_exit);
    return spawn_exit;
  }
  if (!outcome->started) {
    exit_lost_before_start("leadership of " + flags.group, lost.reason());
  }
  if (outcome->stopped) exit_now(kExitLeaseLost);
  resign_bounded(globals, flags.group, elector, outcome->exit_code);
  return outcome->exit_code;
}

int run_elected(const Globals& globals, const ElectFlags& flags,
                const std::vector<std::string>& trailing) {
  ElectPlan plan;
  if (int rc = plan_election(globals, flags, trailing, &plan); rc != kExitOk) {
    return rc;
  }
  // Declared before the client: the metrics file is written when it ends,
  // after the resignation.
  auto observation = Observation::open(flags.observe);
  if (!observation) return report(observation.error());
  auto client = open_client(globals, (*observation)->observer());
  if (!client) return report(client.error());
  const std::string label =
      globals.label.empty() ? client->label() : globals.label;
  // Declared before the elector: its callbacks use them.
  StopNotice lost;
  DeadlineChannel deadlines;
  // In an optional so that it can be destroyed under a StoreDeadline.
  std::optional<Elector> elector;
  elector.emplace(
      *client, flags.group,
      elector_options(globals, flags, plan, label, lost, deadlines));
  std::cerr << "baton: campaigning for " << flags.group << " as " << label
            << '\n';
  if (int rc = campaign_until_elected(globals, elector); rc != kExitOk) {
    return rc;
  }
  return lead(globals, flags, plan, label, elector, lost, deadlines);
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
                  "SIGTERM this long before the term's safe deadline if no "
                  "renewal succeeded; SIGKILL at the deadline. auto = "
                  "min(10s, TTL/3, (TTL - retry interval)/2)")
      ->capture_default_str();
  add_observe_flags(sub, flags->observe);
  return {sub, [flags, &globals, &trailing] {
            return run_elected(globals, *flags, trailing);
          }};
}

}  // namespace baton::cli
