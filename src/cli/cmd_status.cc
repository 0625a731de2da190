// cli/cmd_status.cc — `baton status [lock|prefix] [--json] [--watch]`: who
// holds what, who waits, as a table for people or JSON for machines, once or
// again on every change (where the store has a change feed) or --interval.
// `--serve ADDR` serves the live status page of the store instead, and
// `--history LOCK [--from URL]` prints what a page server (or, without
// --from, batond itself) recorded (cli/status_serve.h,
// cli/status_history.h).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "baton/duration.h"
#include "baton/store.h"
#include "baton/validate.h"
#include "cli/child.h"
#include "cli/cli.h"
#include "cli/status_history.h"
#include "cli/status_serve.h"

namespace baton::cli {

namespace {

struct StatusFlags {
  std::string target;  // exact lock name or prefix; empty = all
  bool json = false;
  std::size_t limit = 1000;
  bool watch = false;
  bool no_push = false;  // --watch / --serve: poll only
  std::chrono::milliseconds interval{1000};
  std::size_t count = 0;  // --watch: stop after this many views (0 = never)
  std::string interval_text = "1s";
  // --serve / --history (cli/status_serve.h).
  std::string serve, prefix, history, from;
  bool serve_public = false;
  std::string history_window_text = "1h";
  std::size_t history_size = 10'000;
};

using Row = std::array<std::string, 5>;

void add_rows(const LockInfo& info, std::vector<Row>& rows) {
  const std::string cap = std::to_string(info.capacity);
  bool first = true;
  auto name_cell = [&]() -> std::string {
    if (!first) return "";
    first = false;
    return info.name;
  };
  for (const HolderInfo& h : info.holders) {
    std::string time = format_human(h.time_left) + " left";
    if (h.holds > 1) time += " (" + std::to_string(h.holds) + " holds)";
    rows.push_back(
        {name_cell(), cap,
         (h.label.empty() ? "?" : h.label) + (h.shared ? " (shared)" : ""),
         std::to_string(h.fencing_token), time});
  }
  if (info.holders.empty()) {
    std::string last = info.last_fencing_token == 0
                           ? "-"
                           : std::to_string(info.last_fencing_token);
    rows.push_back({name_cell(), cap, "(free)", last, ""});
  }
  for (std::size_t i = 0; i < info.waiters.size(); ++i) {
    const WaiterInfo& w = info.waiters[i];
    std::string who = std::to_string(i + 1) + ". " +
                      (w.label.empty() ? "?" : w.label) + " (waiting" +
                      (w.shared ? ", shared" : "") +
                      (w.all_or_nothing ? ", all-or-nothing)" : ")");
    rows.push_back({"", "", who, "-", "waited " + format_human(w.waited)});
  }
}

void print_table(const std::vector<LockInfo>& locks) {
  if (locks.empty()) {
    std::cout << "no locks held or waited on\n";
    return;
  }
  std::vector<Row> rows = {
      Row{"LOCK", "CAP", "HOLDER / WAITER", "FENCING", "TIME"}};
  for (const LockInfo& info : locks) add_rows(info, rows);
  std::array<std::size_t, 5> width{};
  for (const Row& r : rows) {
    for (std::size_t c = 0; c < r.size(); ++c) {
      width[c] = std::max(width[c], r[c].size());
    }
  }
  for (const Row& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size())
        line += std::string(width[c] - r[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::cout << line << '\n';
  }
}

void print_json(const std::vector<LockInfo>& locks) {
  std::ostringstream out;
  out << "{\"locks\":[";
  for (std::size_t i = 0; i < locks.size(); ++i) {
    const LockInfo& info = locks[i];
    if (i > 0) out << ',';
    out << "{\"name\":" << json_string(info.name)
        << ",\"capacity\":" << info.capacity
        << ",\"last_fencing_token\":" << info.last_fencing_token
        << ",\"free\":" << (info.free() ? "true" : "false") << ",\"holders\":[";
    for (std::size_t h = 0; h < info.holders.size(); ++h) {
      const HolderInfo& holder = info.holders[h];
      if (h > 0) out << ',';
      out << "{\"label\":" << json_string(holder.label)
          << ",\"fencing_token\":" << holder.fencing_token
          << ",\"time_left_ms\":" << holder.time_left.count()
          << ",\"holds\":" << holder.holds
          << ",\"shared\":" << (holder.shared ? "true" : "false") << '}';
    }
    out << "],\"waiters\":[";
    for (std::size_t w = 0; w < info.waiters.size(); ++w) {
      const WaiterInfo& waiter = info.waiters[w];
      if (w > 0) out << ',';
      out << "{\"position\":" << (w + 1)
          << ",\"label\":" << json_string(waiter.label)
          << ",\"waited_ms\":" << waiter.waited.count()
          << ",\"all_or_nothing\":"
          << (waiter.all_or_nothing ? "true" : "false")
          << ",\"shared\":" << (waiter.shared ? "true" : "false") << '}';
    }
    out << "]}";
  }
  out << "]}\n";
  std::cout << out.str();
}

// The locks to show (exact name, prefix or all), or an error.
Result<std::vector<LockInfo>> fetch(const Client& client,
                                    const StatusFlags& flags) {
  std::vector<LockInfo> locks;
  if (flags.target.empty()) return client.list({}, flags.limit);
  auto exact = client.describe(flags.target);
  if (!exact) return exact.error();
  if (!exact->holders.empty()) {
    locks.push_back(std::move(*exact));
    return locks;
  }
  // No holder under the exact name: show it, and whatever the name
  // matches as a prefix.
  auto matches = client.list(flags.target, flags.limit);
  if (!matches) return matches.error();
  bool listed =
      std::any_of(matches->begin(), matches->end(),
                  [&](const LockInfo& i) { return i.name == flags.target; });
  if (!listed) locks.push_back(std::move(*exact));
  for (LockInfo& info : *matches) locks.push_back(std::move(info));
  return locks;
}

void show(const std::vector<LockInfo>& locks, const StatusFlags& flags) {
  if (flags.json) {
    print_json(locks);
  } else {
    print_table(locks);
  }
}

// --watch: the view again whenever the store's change feed (Store::watch)
// says a lock under the target changed, at most every 150 ms and at least
// every --interval; every --interval where the store has no feed (or with
// --no-push). In place on a terminal (the screen is cleared), else one view
// after the other (with --json, one document per line). Ends on
// SIGINT/SIGTERM (exit 0), after --count views, or when the store stops
// answering (exit 69).
int watch(const Globals& globals, const StatusFlags& flags,
          const Client& client) {
  SignalLatch latch;
  const bool tty = isatty(STDOUT_FILENO) != 0 && !flags.json;
  std::unique_ptr<Waitable> feed;
  if (!flags.no_push) {
    StoreDeadline bound(globals, std::chrono::milliseconds::zero());
    auto f = client.watch(flags.target);
    if (!f) return report(f.error());
    feed = std::move(*f);
  }
  // A signal ends a wait on the feed (the latch is only polled).
  std::jthread signals;
  if (feed) {
    signals = std::jthread([&latch, &feed](std::stop_token stop) {
      while (!stop.stop_requested() && latch.signal() == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      feed->interrupt();
    });
  }
  const std::string every =
      feed ? "on change, at least every " + format_duration(flags.interval)
           : "every " + format_duration(flags.interval);
  auto last = std::chrono::steady_clock::now();
  for (std::size_t n = 0; flags.count == 0 || n < flags.count; ++n) {
    if (n > 0) {
      if (feed) {
        const auto until =
            Clock::steady()->now() +
            (last + flags.interval - std::chrono::steady_clock::now());
        (void)feed->wait_change(
            until,
            CallContext(until + std::chrono::seconds(10), {}, Clock::steady()));
      }
      const auto next =
          last + (feed ? std::chrono::milliseconds(150) : flags.interval);
      while (std::chrono::steady_clock::now() < next) {
        if (latch.signal() != 0) return kExitOk;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (latch.signal() != 0) return kExitOk;
    }
    last = std::chrono::steady_clock::now();
    Result<std::vector<LockInfo>> locks = Error(Errc::internal, "unset");
    {
      StoreDeadline bound(globals, std::chrono::milliseconds::zero());
      locks = fetch(client, flags);
    }
    if (!locks) return report(locks.error());
    if (tty) {
      std::cout << "\033[H\033[2J" << every << " (Ctrl-C to stop)\n\n";
    } else if (n > 0 && !flags.json) {
      std::cout << "\n";
    }
    show(*locks, flags);
    std::cout.flush();
  }
  return kExitOk;
}

int do_serve(const Globals& globals, const StatusFlags& flags) {
  if (flags.watch || !flags.history.empty()) {
    return report(Errc::invalid_argument,
                  "--serve does not go with --watch or --history");
  }
  if (!flags.prefix.empty() && !flags.target.empty()) {
    return report(Errc::invalid_argument,
                  "give the prefix once: as --prefix or as the argument");
  }
  ServeOptions o;
  o.listen = flags.serve;
  o.serve_public = flags.serve_public;
  o.prefix = flags.prefix.empty() ? flags.target : flags.prefix;
  o.interval = flags.interval;
  o.push = !flags.no_push;
  o.history_size = flags.history_size;
  if (std::string bad = check_serve_address(o.listen, o.serve_public);
      !bad.empty()) {
    return report(Errc::invalid_argument, bad);
  }
  if (!o.prefix.empty()) {
    if (Status s = validate_lock_name(o.prefix, "prefix"); !s) {
      return report(s.error());
    }
  }
  if (flags.interval < std::chrono::milliseconds(100)) {
    return report(Errc::invalid_argument, "--interval " +
                                              format_duration(flags.interval) +
                                              " is too short; at least 100ms");
  }
  auto window =
      parse_duration_flag("--history-window", flags.history_window_text, false);
  if (!window) return report(window.error());
  if (*window < std::chrono::seconds(1) || *window > std::chrono::hours(168)) {
    return report(Errc::invalid_argument, "--history-window must be 1s .. 7d");
  }
  if (flags.history_size > 10'000'000) {
    return report(Errc::invalid_argument, "--history-size > 10000000");
  }
  o.history_window = *window;
  std::optional<StoreDeadline> bound;
  bound.emplace(globals, std::chrono::milliseconds::zero());
  auto client = open_client(globals);
  if (!client) return report(client.error());
  bound.reset();
  return serve_status_page(globals, *client, o);
}

int do_status(const Globals& globals, const StatusFlags& flags) {
  if (!flags.serve.empty()) return do_serve(globals, flags);
  if (!flags.history.empty() || !flags.from.empty()) {
    if (flags.history.empty()) {
      return report(Errc::invalid_argument,
                    "--from URL goes with --history "
                    "LOCK");
    }
    if (Status s = validate_lock_name(flags.history); !s) {
      return report(s.error());
    }
    // Without --from: batond's own history, over its lock protocol.
    if (flags.from.empty()) {
      return print_store_history(globals, flags.history, flags.json);
    }
    return print_history(flags.from, flags.history, flags.json,
                         globals.timeout);
  }
  if (!flags.prefix.empty()) {
    return report(Errc::invalid_argument, "--prefix goes with --serve");
  }
  if (flags.no_push && !flags.watch) {
    return report(Errc::invalid_argument,
                  "--no-push goes with --watch or --serve");
  }
  if (!flags.target.empty()) {
    // A prefix need not be a whole name, but the same limits apply.
    if (Status s = validate_lock_name(flags.target, "lock name or prefix");
        !s) {
      return report(s.error());
    }
  }
  if (flags.watch && flags.interval < std::chrono::milliseconds(100)) {
    return report(Errc::invalid_argument, "--interval " +
                                              format_duration(flags.interval) +
                                              " is too short; at least 100ms");
  }
  std::optional<StoreDeadline> bound;
  bound.emplace(globals, std::chrono::milliseconds::zero());
  auto client = open_client(globals);
  if (!client) return report(client.error());
  bound.reset();
  if (flags.watch) return watch(globals, flags, *client);
  bound.emplace(globals, std::chrono::milliseconds::zero());
  auto locks = fetch(*client, flags);
  if (!locks) return report(locks.error());
  show(*locks, flags);
  return kExitOk;
}

}  // namespace

Command add_status_command(CLI::App& app, const Globals& globals) {
  auto flags = std::make_shared<StatusFlags>();
  CLI::App* sub = app.add_subcommand(
      "status",
      "Show holders and waiters: of one lock (exact name), or of every lock "
      "whose name starts with a prefix (default: all).");
  sub->add_option("lock", flags->target, "Lock name or name prefix");
  sub->add_option("--limit", flags->limit, "At most this many locks")
      ->capture_default_str();
  sub->add_flag("--json", flags->json, "Print JSON");
  sub->add_flag("--watch", flags->watch,
                "Show the view again every --interval until Ctrl-C (in place "
                "on a terminal)");
  sub->add_option("--interval", flags->interval_text,
                  "--watch, --serve: time between views / polls (at least "
                  "100ms); where the store has a change feed, the longest "
                  "time between two")
      ->capture_default_str();
  sub->add_flag("--no-push", flags->no_push,
                "--watch, --serve: poll every --interval even where the "
                "store has a change feed");
  sub->add_option("--count", flags->count,
                  "--watch: stop after this many views (0 = never)")
      ->capture_default_str();
  sub->add_option("--serve", flags->serve,
                  "Serve the live status page of the store on host:port "
                  "(loopback only unless --serve-public), on the store's "
                  "changes where it has a change feed, else polling every "
                  "--interval");
  sub->add_flag("--serve-public", flags->serve_public,
                "--serve: allow a non-loopback address (the page has no "
                "authentication)");
  sub->add_option("--prefix", flags->prefix,
                  "--serve: poll only the locks under this prefix");
  sub->add_option("--history-window", flags->history_window_text,
                  "--serve: how far back the history goes")
      ->capture_default_str();
  sub->add_option("--history-size", flags->history_size,
                  "--serve: most history events kept (0 = none)")
      ->capture_default_str();
  sub->add_option("--history", flags->history,
                  "Print the recorded history of this lock: batond's (on "
                  "baton://, asked of --store), or --from a page server");
  sub->add_option("--from", flags->from,
                  "--history: the page server, http://host:port (batond's "
                  "metrics listener or a --serve address)");
  return {sub, [flags, &globals] {
            auto interval =
                parse_duration_flag("--interval", flags->interval_text, false);
            if (!interval) return report(interval.error());
            flags->interval = *interval;
            return do_status(globals, *flags);
          }};
}

}  // namespace baton::cli
