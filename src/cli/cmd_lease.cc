// cli/cmd_lease.cc — `baton acquire`, `baton extend`, `baton release`: one
// lease operation per call, for scripts that manage the token themselves.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>

#include "baton/duration.h"
#include "baton/validate.h"
#include "cli/cli.h"

namespace baton::cli {

namespace {

using std::chrono::milliseconds;

struct LeaseFlags {
  std::string lock;
  std::string token;
  std::string ttl = "30s";
  std::string wait = "0";
  std::uint32_t capacity = 1;
  bool json = false;
  bool shared = false;  // --shared (acquire): rule 18
};

void print_lease(const Lease& lease, bool json) {
  if (json) {
    std::cout << "{\"lock\":" << json_string(lease.name)
              << ",\"token\":" << json_string(lease.token.to_string())
              << ",\"fencing_token\":" << lease.fencing_token
              << ",\"ttl\":" << json_string(format_duration(lease.ttl))
              << ",\"ttl_ms\":" << lease.ttl.count()
              << ",\"capacity\":" << lease.capacity
              << ",\"holds\":" << lease.holds
              << ",\"shared\":" << (lease.shared ? "true" : "false")
              << ",\"store_expires_at_ms\":" << lease.store_expires_at_ms
              << "}\n";
  } else {
    std::cout << "token=" << lease.token.to_string()
              << " fencing=" << lease.fencing_token
              << " ttl=" << format_duration(lease.ttl) << "\n";
  }
}

// A Lease value naming (lock, token), for extend and release.
Result<Lease> lease_from_flags(const LeaseFlags& flags) {
  if (Status s = validate_lock_name(flags.lock); !s) return s.error();
  auto token = OwnerToken::parse(flags.token);
  if (!token) {
    return Error(Errc::invalid_argument,
                 "owner token: " + token.error().message());
  }
  Lease lease;
  lease.name = flags.lock;
  lease.token = *token;
  lease.capacity = flags.capacity;
  return lease;
}

int do_acquire(const Globals& globals, const LeaseFlags& flags) {
  auto parsed = parse_lock_flags(globals, flags.lock, flags.ttl, flags.wait,
                                 flags.capacity);
  if (!parsed) return report(parsed.error());
  StoreDeadline bound(globals, parsed->wait);
  auto client = open_client(globals);
  if (!client) return report(client.error());
  AcquireOptions options;
  options.ttl = parsed->ttl;
  options.capacity = flags.capacity;
  options.label = globals.label;
  options.token = OwnerToken::random();
  auto lease = flags.shared
                   ? client->acquire_shared(flags.lock, parsed->wait, options)
               : parsed->wait == milliseconds::zero()
                   ? client->try_acquire(flags.lock, options)
                   : client->acquire(flags.lock, parsed->wait, options);
  if (!lease)
    return report(with_holders_of(*client, flags.lock, lease.error()));
  print_lease(*lease, flags.json);
  return kExitOk;
}

int do_extend(const Globals& globals, const LeaseFlags& flags) {
  auto ttl = parse_duration_flag("--ttl", flags.ttl, false);
  if (!ttl) return report(ttl.error());
  if (Status s = validate_ttl(*ttl); !s) return report(s.error());
  auto lease = lease_from_flags(flags);
  if (!lease) return report(lease.error());
  StoreDeadline bound(globals, milliseconds::zero());
  auto client = open_client(globals);
  if (!client) return report(client.error());
  auto extended = client->extend(*lease, *ttl);
  if (!extended) return report(extended.error());
  print_lease(*extended, flags.json);
  return kExitOk;
}

int do_release(const Globals& globals, const LeaseFlags& flags) {
  auto lease = lease_from_flags(flags);
  if (!lease) return report(lease.error());
  StoreDeadline bound(globals, milliseconds::zero());
  auto client = open_client(globals);
  if (!client) return report(client.error());
  auto released = client->release(*lease);
  if (!released) return report(released.error());
  if (!*released) {
    report(Errc::lock_lost, "lease on " + flags.lock +
                                " was no longer held (expired, released or "
                                "taken over); nothing changed");
    return kExitFailure;
  }
  if (flags.json) std::cout << "{\"released\":true}\n";
  return kExitOk;
}

}  // namespace

Command add_acquire_command(CLI::App& app, const Globals& globals) {
  auto flags = std::make_shared<LeaseFlags>();
  CLI::App* sub = app.add_subcommand(
      "acquire",
      "Acquire <lock> once (no renewal) and print its owner token, fencing "
      "token and TTL.");
  sub->add_option("lock", flags->lock, "Lock name")->required();
  sub->add_option("--ttl", flags->ttl, "Lease TTL")->capture_default_str();
  sub->add_option("--wait", flags->wait,
                  "How long to wait: 0 (try once), a duration or \"forever\"")
      ->capture_default_str();
  sub->add_option("--capacity", flags->capacity,
                  "Holders allowed at once (1 = mutex)")
      ->capture_default_str();
  sub->add_flag("--shared", flags->shared,
                "Take a shared (read) lease (capacity 1 only)");
  sub->add_flag("--json", flags->json, "Print JSON");
  return {sub, [flags, &globals] { return do_acquire(globals, *flags); }};
}

Command add_extend_command(CLI::App& app, const Globals& globals) {
  auto flags = std::make_shared<LeaseFlags>();
  CLI::App* sub = app.add_subcommand(
      "extend", "Extend a held lease to now + TTL (store time).");
  sub->add_option("lock", flags->lock, "Lock name")->required();
  sub->add_option("token", flags->token, "Owner token (32 hex digits)")
      ->required();
  sub->add_option("--ttl", flags->ttl, "New TTL, counted from now")
      ->capture_default_str();
  sub->add_flag("--json", flags->json, "Print JSON");
  return {sub, [flags, &globals] { return do_extend(globals, *flags); }};
}

Command add_release_command(CLI::App& app, const Globals& globals) {
  auto flags = std::make_shared<LeaseFlags>();
  CLI::App* sub = app.add_subcommand(
      "release",
      "Release a lease. Exit 0 if released, 1 if it was no longer held.");
  sub->add_option("lock", flags->lock, "Lock name")->required();
  sub->add_option("token", flags->token, "Owner token (32 hex digits)")
      ->required();
  sub->add_flag("--json", flags->json, "Print JSON");
  return {sub, [flags, &globals] { return do_release(globals, *flags); }};
}

}  // namespace baton::cli
