// cli/cmd_leader.cc — `baton leader <group> [--json] [--watch]`: who leads
// an election group of `baton elect` now (its owner label, term = fencing
// token, time left), once, or every change until Ctrl-C.
//
// The leader of a group is the holder of the lock named after it, so this
// is describe() of the public client API. The client API has no call that
// waits for a change, so --watch asks again every --interval and prints
// only changes of leader (label or term).
#include <time.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "baton/duration.h"
#include "baton/validate.h"
#include "cli/child.h"
#include "cli/cli.h"

namespace baton::cli {

namespace {

using std::chrono::milliseconds;

struct LeaderFlags {
  std::string group;
  bool json = false;
  bool watch = false;
  std::string interval_text = "1s";
  std::size_t count = 0;  // --watch: stop after this many changes
};

// The leader as describe() shows it; none when the group's lock is free.
std::optional<HolderInfo> leader_of(const LockInfo& info) {
  if (info.holders.empty()) return std::nullopt;
  return info.holders.front();
}

// "billing: node-a:977:baton (term 17, 12s left)" / "billing: no leader".
std::string text_line(const std::string& group,
                      const std::optional<HolderInfo>& leader) {
  if (!leader) return group + ": no leader";
  return group + ": " + (leader->label.empty() ? "?" : leader->label) +
         " (term " + std::to_string(leader->fencing_token) + ", " +
         format_human(leader->time_left) + " left)";
}

std::string json_line(const std::string& group,
                      const std::optional<HolderInfo>& leader) {
  std::string out = "{\"group\":" + json_string(group) + ",\"leader\":";
  if (!leader) return out + "null}";
  return out + "{\"label\":" + json_string(leader->label) +
         ",\"term\":" + std::to_string(leader->fencing_token) +
         ",\"time_left_ms\":" + std::to_string(leader->time_left.count()) +
         "}}";
}

// UTC now as "2026-11-29T01:23:45.123Z", the prefix of --watch lines.
std::string utc_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tm parts;
  gmtime_r(&ts.tv_sec, &parts);
  char buf[80];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                parts.tm_hour, parts.tm_min, parts.tm_sec,
                static_cast<int>(ts.tv_nsec / 1'000'000));
  return buf;
}

Result<std::optional<HolderInfo>> ask(const Globals& globals,
                                      const Client& client,
                                      const std::string& group) {
  StoreDeadline bound(globals, milliseconds::zero());
  auto info = client.describe(group);
  if (!info) return info.error();
  return leader_of(*info);
}

// Each change of leader (label or term), from the current one on, until
// SIGINT/SIGTERM (exit 0), --count changes, or the store stops answering.
int watch(const Globals& globals, const LeaderFlags& flags,
          const Client& client, milliseconds interval) {
  SignalLatch latch;
  std::optional<std::optional<HolderInfo>> last;  // unset: nothing printed
  std::size_t printed = 0;
  for (;;) {
    auto now = ask(globals, client, flags.group);
    if (!now) return report(now.error());
    const bool changed =
        !last || last->has_value() != now->has_value() ||
        (now->has_value() && ((*last)->label != (*now)->label ||
                              (*last)->fencing_token != (*now)->fencing_token));
    if (changed) {
      if (flags.json) {
        std::string line = json_line(flags.group, *now);
        line.insert(line.size() - 1, ",\"at\":" + json_string(utc_now()));
        std::cout << line << '\n';
      } else {
        std::cout << utc_now() << ' ' << text_line(flags.group, *now) << '\n';
      }
      std::cout.flush();
      last = *now;
      if (flags.count != 0 && ++printed >= flags.count) return kExitOk;
    }
    const auto next = std::chrono::steady_clock::now() + interval;
    while (std::chrono::steady_clock::now() < next) {
      if (latch.signal() != 0) return kExitOk;
      std::this_thread::sleep_for(milliseconds(20));
    }
  }
}

int show_leader(const Globals& globals, const LeaderFlags& flags) {
  if (Status s = validate_lock_name(flags.group, "group name"); !s) {
    return report(s.error());
  }
  auto interval = parse_duration_flag("--interval", flags.interval_text, false);
  if (!interval) return report(interval.error());
  if (flags.watch && *interval < milliseconds(100)) {
    return report(Errc::invalid_argument, "--interval " +
                                              format_duration(*interval) +
                                              " is too short; at least 100ms");
  }
  std::optional<StoreDeadline> bound;
  bound.emplace(globals, milliseconds::zero());
  auto client = open_client(globals);
  if (!client) return report(client.error());
  bound.reset();
  if (flags.watch) return watch(globals, flags, *client, *interval);
  auto leader = ask(globals, *client, flags.group);
  if (!leader) return report(leader.error());
  if (flags.json) std::cout << json_line(flags.group, *leader) << '\n';
  if (!*leader) {
    return report(Errc::not_acquired, "no leader of " + flags.group);
  }
  if (!flags.json) std::cout << text_line(flags.group, *leader) << '\n';
  return kExitOk;
}

}  // namespace

Command add_leader_command(CLI::App& app, const Globals& globals) {
  auto flags = std::make_shared<LeaderFlags>();
  CLI::App* sub = app.add_subcommand(
      "leader",
      "Show the leader of an election group (baton elect): its label, term "
      "(fencing token) and time left; exit 75 if there is none. --watch "
      "prints each change of leader until Ctrl-C.");
  sub->add_option("group", flags->group, "Election group")->required();
  sub->add_flag("--json", flags->json, "Print JSON");
  sub->add_flag("--watch", flags->watch,
                "Print the leader, then each change of leader, until Ctrl-C");
  sub->add_option("--interval", flags->interval_text,
                  "--watch: how often to ask the store (at least 100ms)")
      ->capture_default_str();
  sub->add_option("--count", flags->count,
                  "--watch: stop after printing this many leaders (0 = "
                  "never)")
      ->capture_default_str();
  return {sub, [flags, &globals] { return show_leader(globals, *flags); }};
}

}  // namespace baton::cli
