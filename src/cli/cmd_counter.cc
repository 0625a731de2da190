// cli/cmd_counter.cc — `baton counter get|add|take <name> [n]`: atomic
// counters stored beside the locks. Prints the (new) value.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include "baton/counter.h"
#include "baton/validate.h"
#include "cli/cli.h"

namespace baton::cli {

namespace {

struct CounterFlags {
  std::string name;
  std::int64_t n = 1;
  bool json = false;
};

enum class Op { get, add, take };

int do_counter(const Globals& globals, const CounterFlags& flags, Op op) {
  if (Status s = validate_lock_name(flags.name, "counter name"); !s) {
    return report(s.error());
  }
  if (op == Op::take && flags.n < 1) {
    return report(Errc::invalid_argument,
                  "take: n must be at least 1, got " + std::to_string(flags.n));
  }
  StoreDeadline bound(globals, std::chrono::milliseconds::zero());
  auto client = open_client(globals);
  if (!client) return report(client.error());
  Counter counter = client->counter(flags.name);
  Result<std::int64_t> value = op == Op::get   ? counter.get()
                               : op == Op::add ? counter.add(flags.n)
                                               : counter.take(flags.n);
  if (!value) return report(value.error());
  if (flags.json) {
    std::cout << "{\"counter\":" << json_string(flags.name)
              << ",\"value\":" << *value << "}\n";
  } else {
    std::cout << *value << '\n';
  }
  return kExitOk;
}

}  // namespace

Command add_counter_command(CLI::App& app, const Globals& globals) {
  auto flags = std::make_shared<CounterFlags>();
  CLI::App* sub = app.add_subcommand(
      "counter",
      "Atomic counters: get, add (may be negative), take (never "
      "below zero; exit 75 if not enough).");
  sub->require_subcommand(1);
  CLI::App* get = sub->add_subcommand("get", "Print the current value");
  CLI::App* add =
      sub->add_subcommand("add", "Add n (default 1); print the new value");
  CLI::App* take = sub->add_subcommand(
      "take",
      "Take n (default 1) if the value stays >= 0; print the new value");
  for (CLI::App* op : {get, add, take}) {
    op->add_option("name", flags->name, "Counter name")->required();
    if (op != get)
      op->add_option("n", flags->n, "Amount")->capture_default_str();
    op->add_flag("--json", flags->json, "Print JSON");
  }
  return {
      sub, [flags, &globals, get, add] {
        Op op = get->parsed() ? Op::get : add->parsed() ? Op::add : Op::take;
        return do_counter(globals, *flags, op);
      }};
}

}  // namespace baton::cli
