// cli/cmd_run.cc — `baton run <lock> [flags] -- cmd args...`: hold a lock
// (renewed by a LeaseKeeper) while a command runs.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "baton/duration.h"
#include "baton/keeper.h"
#include "baton/validate.h"
#include "cli/child.h"
#include "cli/cli.h"
#include "cli/observe.h"

namespace baton::cli {

namespace {

using std::chrono::milliseconds;

struct RunFlags {
  std::string lock;
  std::vector<std::string> command;
  std::string ttl = "30s";
  std::string wait = "0";
  std::uint32_t capacity = 1;
  std::string grace = "auto";
  bool shared = false;  // --shared: a shared (read) lease, rule 18
  // At most once per window: keep the lease until grant + this even when
  // the command ends sooner ("0" = off).
  std::string hold_at_least = "0";
  // SIGTERM this long after the start, SIGKILL --grace later ("0" = off).
  std::string max_runtime = "0";
  ObserveFlags observe;  // --metrics-file, --events
};

// A duration flag that is 0 (off) or within the TTL range.
Result<milliseconds> parse_optional_limit(std::string_view flag,
                                          std::string_view text) {
  auto d = parse_duration_flag(flag, text, false);
  if (!d) return d.error();
  if (*d != milliseconds::zero() && (*d < kMinTtl || *d > kMaxTtl)) {
    return Error(Errc::invalid_argument,
                 std::string(flag) + " " + format_duration(*d) +
                     " is out of range (0 = off, or 1ms .. 7d)");
  }
  return *d;
}

// What run prints when the guard stops the command: the lease's
// lock_lost line, or the --max-runtime line.
std::function<void(const StopEvent&)> stop_reporter(std::string lock,
                                                    milliseconds grace,
                                                    milliseconds max_runtime) {
  return [lock = std::move(lock), grace, max_runtime](const StopEvent& event) {
    if (event.cause == StopEvent::Cause::max_runtime) {
      // One write (the command shares stderr).
      std::cerr << ("baton: " +
                    describe_stop("the command reached --max-runtime " +
                                      format_duration(max_runtime),
                                  event, grace) +
                    "\n");
      return;
    }
    report(Errc::lock_lost, describe_stop("lease on " + lock, event, grace));
  };
}

// Releases the lease (bounded by --timeout) and returns `code`.
int release_bounded(const Globals& globals, const std::string& lock,
                    LeaseKeeper& keeper, int code) {
  StoreDeadline release_bound(
      globals, milliseconds::zero(),
      "the lease on " + lock + " was not released; it expires by its TTL",
      code);
  (void)keeper.release();
  return code;
}

// --hold-at-least: the command ended at `now`, before grant + window
// (`end`). Where a lease outlives its client, the renewal stops and the
// lease is extended to `end` (extend-to, in store time) and left to expire
// there: no process needs to stay. Where it does not (zookeeper://,
// memory:), baton stays, renewing as before, and releases it at `end`.
int hold_until(const Globals& globals, const Client& client,
               const std::string& lock, LeaseKeeper& keeper,
               std::chrono::steady_clock::time_point end, int code) {
  const std::string what =
      "the lease on " + lock + " was not kept to the end of --hold-at-least";
  if (!client.leases_outlive_client()) {
    SignalLatch latch;
    while (std::chrono::steady_clock::now() < end && !keeper.lost()) {
      if (int sig = latch.signal(); sig != 0) {
        std::cerr << "baton: stopped while holding " << lock
                  << " for --hold-at-least; released early\n";
        return release_bounded(globals, lock, keeper, 128 + sig);
      }
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          milliseconds(50), end - std::chrono::steady_clock::now()));
    }
    if (keeper.lost()) {
      report(Errc::lock_lost, what + ": it was lost");
      return code;
    }
    return release_bounded(globals, lock, keeper, code);
  }
  StoreDeadline bound(globals, milliseconds::zero(),
                      what + "; it expires by its TTL", code);
  auto lease = keeper.detach();
  if (!lease) {
    report(lease.error().code(), what + ": " + lease.error().message());
    return code;
  }
  const milliseconds left = std::max(
      kMinTtl,
      std::chrono::ceil<milliseconds>(end - std::chrono::steady_clock::now()));
  auto extended = client.extend(*lease, left);
  if (!extended) {
    report(extended.error().code(),
           what + " (it expires by its TTL): " + extended.error().message());
  }
  return code;
}

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
// the calling thread asks describe() every second and shows our place in
// the queue. The acquire itself is one blocking request, so the FIFO place
// is never given up. SIGINT/SIGTERM/SIGHUP/SIGQUIT while waiting withdraw
// the request (AcquireOptions::stop) before baton exits with 128 + signal
// (*signal_exit), so nothing of it stays queued.
Result<LeaseKeeper> acquire_with_progress(
    const Client& client, const std::string& lock, milliseconds wait,
    AcquireOptions acquire_options, const KeeperOptions& keeper_options,
    const std::string& label, bool shared, int* signal_exit) {
  *signal_exit = 0;
  auto take = [&] {
    return shared ? LeaseKeeper::acquire_shared(client, lock, wait,
                                                acquire_options, keeper_options)
                  : LeaseKeeper::acquire(client, lock, wait, acquire_options,
                                         keeper_options);
  };
  if (wait == milliseconds::zero()) return take();
  std::stop_source stop;
  acquire_options.stop = stop.get_token();
  SignalLatch latch;
  auto pending = std::async(std::launch::async, take);
  const bool tty = isatty(STDERR_FILENO) != 0;
  bool shown = false;
  auto next_progress =
      std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (pending.wait_for(milliseconds(50)) != std::future_status::ready) {
    if (int sig = latch.signal(); sig != 0 && *signal_exit == 0) {
      *signal_exit = 128 + sig;
      stop.request_stop();  // the acquire withdraws and returns
    }
    if (!tty || *signal_exit != 0 ||
        std::chrono::steady_clock::now() < next_progress) {
      continue;
    }
    next_progress = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    auto info = client.describe(lock);
    if (!info) continue;
    std::cerr << "\r\033[K" << progress_line(*info, lock, label) << std::flush;
    shown = true;
  }
  if (shown) std::cerr << "\r\033[K" << std::flush;
  return pending.get();
}

// The command's environment: the lock, the grant's fencing and owner
// tokens, the owner label and the store.
EnvList command_env(const Globals& globals, const std::string& lock,
                    const std::string& label, const Lease& lease) {
  return {
      {"BATON_LOCK", lock},
      {"BATON_FENCING_TOKEN", std::to_string(lease.fencing_token)},
      {"BATON_OWNER_LABEL", label},
      {"BATON_OWNER_TOKEN", lease.token.to_string()},
      {"BATON_STORE", globals.store},
  };
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
  // The keeper renews every TTL/3 (KeeperOptions::renew_interval = 0).
  const milliseconds renew_interval =
      std::max(milliseconds(1), parsed->ttl / 3);
  auto grace = parse_grace(flags.grace, parsed->ttl, renew_interval);
  if (!grace) return report(grace.error());
  auto hold = parse_optional_limit("--hold-at-least", flags.hold_at_least);
  if (!hold) return report(hold.error());
  auto max_runtime = parse_optional_limit("--max-runtime", flags.max_runtime);
  if (!max_runtime) return report(max_runtime.error());
  // Found before the lock is taken: a typo costs no lease.
  int not_runnable = 0;
  auto path = resolve_command(command[0], &not_runnable);
  if (!path) return report_cannot_run(path.error(), not_runnable);
  // Checked before the lock is taken; outlives the client (and the lease).
  auto observation = Observation::open(flags.observe);
  if (!observation) return report(observation.error());

  std::optional<StoreDeadline> bound;
  bound.emplace(globals, parsed->wait);
  auto client = open_client(globals, (*observation)->observer());
  if (!client) return report(client.error());
  const std::string label =
      globals.label.empty() ? client->label() : globals.label;

  AcquireOptions acquire_options;
  acquire_options.ttl = parsed->ttl;
  acquire_options.capacity = flags.capacity;
  acquire_options.label = globals.label;
  acquire_options.token = OwnerToken::random();

  // Declared before the keeper: its callbacks use them.
  StopNotice lost;
  DeadlineChannel deadlines;
  KeeperOptions keeper_options;
  keeper_options.on_lost = [&lost](const Error& e) {
    lost.notify(e.to_string());
  };
  keeper_options.on_renewed = [&deadlines](const Lease& renewed) {
    deadlines.renewed(renewed.local_deadline);
  };

  int signal_exit = 0;
  auto keeper =
      acquire_with_progress(*client, flags.lock, parsed->wait, acquire_options,
                            keeper_options, label, flags.shared, &signal_exit);
  if (signal_exit != 0) {
    std::cerr << "baton: stopped while waiting for " << flags.lock
              << "; the request was withdrawn\n";
    if (keeper) {  // granted just before the signal was seen
      StoreDeadline release_bound(globals, milliseconds::zero(), "",
                                  signal_exit);
      (void)keeper->release();
    }
    return signal_exit;
  }
  if (!keeper) {
    return report(with_holders_of(*client, flags.lock, keeper.error()));
  }
  // --hold-at-least counts from here, after the grant: the window is at
  // least as long in store time.
  const auto granted_at = std::chrono::steady_clock::now();
  bound.reset();
  // The grace against what the store granted (it may be less than --ttl).
  grace = fit_grace(flags.grace, *grace, parsed->ttl, milliseconds::zero(),
                    keeper->safe_deadline(), globals.store);
  if (!grace) {
    report(grace.error());
    return release_bounded(globals, flags.lock, *keeper, kExitUsage);
  }

  SuperviseOptions supervise_options;
  supervise_options.argv = command;
  supervise_options.path = *path;
  supervise_options.env =
      command_env(globals, flags.lock, label, keeper->lease());
  const LeaseKeeper& held = *keeper;
  supervise_options.deadline = [&held] { return held.safe_deadline(); };
  supervise_options.notice = &lost;
  supervise_options.stop = &keeper->cancelled();
  supervise_options.channel = &deadlines;
  supervise_options.grace = *grace;
  supervise_options.max_runtime = *max_runtime;
  supervise_options.on_stop = stop_reporter(flags.lock, *grace, *max_runtime);

  int spawn_exit = 0;
  auto outcome = supervise(supervise_options, &spawn_exit);
  if (!outcome) {
    report_cannot_run(outcome.error(), spawn_exit);
    return release_bounded(globals, flags.lock, *keeper, spawn_exit);
  }
  if (!outcome->started) {
    exit_lost_before_start("lease on " + flags.lock, lost.reason());
  }
  if (outcome->stopped) {
    // Lost, or about to be: never wait for the store now (its renewal
    // call may hang); the lease expires by its TTL if it is still there.
    exit_now(kExitLeaseLost);
  }
  const int code = outcome->max_runtime ? kExitMaxRuntime : outcome->exit_code;
  if (*hold > milliseconds::zero() &&
      std::chrono::steady_clock::now() < granted_at + *hold) {
    return hold_until(globals, *client, flags.lock, *keeper, granted_at + *hold,
                      code);
  }
  return release_bounded(globals, flags.lock, *keeper, code);
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
  sub->add_flag("--shared", flags->shared,
                "Take a shared (read) lease: many --shared runs may hold "
                "<lock> at once, a run without it holds it alone; one FIFO "
                "queue for both (capacity 1 only)");
  sub->add_option("--grace", flags->grace,
                  "SIGTERM this long before the lease's safe deadline if no "
                  "renewal succeeded; SIGKILL at the deadline. auto = "
                  "min(10s, TTL/3); must be < 2/3 TTL")
      ->capture_default_str();
  sub->add_option("--hold-at-least", flags->hold_at_least,
                  "At most once per window: if the command ends sooner, keep "
                  "<lock> until this long after the grant (extended to it, "
                  "not released); 0 = off")
      ->capture_default_str();
  sub->add_option("--max-runtime", flags->max_runtime,
                  "SIGTERM the command this long after it started, SIGKILL "
                  "--grace later; baton then exits 124. 0 = no limit")
      ->capture_default_str();
  add_observe_flags(sub, flags->observe);
  return {sub, [flags, &globals, &trailing] {
            return run_locked(globals, *flags, trailing);
          }};
}

}  // namespace baton::cli
