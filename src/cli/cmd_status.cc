// cli/cmd_status.cc — `baton status [lock|prefix] [--json]`: who holds what,
// who waits, as a table for people or JSON for machines.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "baton/validate.h"
#include "cli/cli.h"

namespace baton::cli {

namespace {

struct StatusFlags {
  std::string target;  // exact lock name or prefix; empty = all
  bool json = false;
  std::size_t limit = 1000;
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
    rows.push_back({name_cell(), cap, h.label.empty() ? "?" : h.label,
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
          << ",\"holds\":" << holder.holds << '}';
    }
    out << "],\"waiters\":[";
    for (std::size_t w = 0; w < info.waiters.size(); ++w) {
      const WaiterInfo& waiter = info.waiters[w];
      if (w > 0) out << ',';
      out << "{\"position\":" << (w + 1)
          << ",\"label\":" << json_string(waiter.label)
          << ",\"waited_ms\":" << waiter.waited.count()
          << ",\"all_or_nothing\":"
          << (waiter.all_or_nothing ? "true" : "false") << '}';
    }
    out << "]}";
  }
  out << "]}\n";
  std::cout << out.str();
}

int do_status(const Globals& globals, const StatusFlags& flags) {
  if (!flags.target.empty()) {
    // A prefix need not be a whole name, but the same limits apply.
    if (Status s = validate_lock_name(flags.target, "lock name or prefix");
        !s) {
      return report(s.error());
    }
  }
  StoreDeadline bound(globals, std::chrono::milliseconds::zero());
  auto client = open_client(globals);
  if (!client) return report(client.error());

  std::vector<LockInfo> locks;
  if (flags.target.empty()) {
    auto all = client->list({}, flags.limit);
    if (!all) return report(all.error());
    locks = std::move(*all);
  } else {
    auto exact = client->describe(flags.target);
    if (!exact) return report(exact.error());
    if (!exact->holders.empty()) {
      locks.push_back(std::move(*exact));
    } else {
      // No holder under the exact name: show it, and whatever the name
      // matches as a prefix.
      auto matches = client->list(flags.target, flags.limit);
      if (!matches) return report(matches.error());
      bool listed = std::any_of(
          matches->begin(), matches->end(),
          [&](const LockInfo& i) { return i.name == flags.target; });
      if (!listed) locks.push_back(std::move(*exact));
      for (LockInfo& info : *matches) locks.push_back(std::move(info));
    }
  }
  if (flags.json) {
    print_json(locks);
  } else {
    print_table(locks);
  }
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
  return {sub, [flags, &globals] { return do_status(globals, *flags); }};
}

}  // namespace baton::cli
