// cli/cli.h — shared pieces of the `baton` command-line tool: global flags,
// documented exit codes, error reporting and small formatting helpers.
//
// The CLI is a thin shell around baton::Client: it parses flags, calls the
// client and prints. It never decides lock rules itself.
//
// Each subcommand lives in its own cmd_<name>.cc and registers itself with
// add_<name>_command(); main.cc runs the one that was parsed. New commands
// (e.g. `baton bench`) add one file and one line in main.cc.
//
// Thread safety: the helpers are pure except print_* (stdout/stderr).
#ifndef BATON_CLI_CLI_H_
#define BATON_CLI_CLI_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/client.h"
#include "baton/error.h"
#include "baton/lease.h"
#include "baton/options.h"

namespace CLI {
class App;
}

namespace baton::cli {

// Documented exit codes (docs/cli.md). Commands run by `baton run` /
// `baton elect` pass their own status through (128+N when killed by N).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;       // e.g. release: no longer held
inline constexpr int kExitUsage = 64;        // EX_USAGE: bad flag/argument
inline constexpr int kExitUnavailable = 69;  // EX_UNAVAILABLE: store down
inline constexpr int kExitInternal = 70;     // EX_SOFTWARE: internal error
inline constexpr int kExitNotAcquired = 75;  // EX_TEMPFAIL: busy / timeout
inline constexpr int kExitLeaseLost = 76;    // lease or leadership lost
inline constexpr int kExitPermission = 77;   // EX_NOPERM
inline constexpr int kExitCancelled = 130;   // a wait ended by SIGINT
// run --max-runtime stopped the command (as timeout(1) exits).
inline constexpr int kExitMaxRuntime = 124;
inline constexpr int kExitCannotExec = 126;  // command found, not runnable
inline constexpr int kExitNotFound = 127;    // command not found

// Flags shared by every subcommand.
struct Globals {
  std::string store = "baton://127.0.0.1:7420";  // --store / BATON_STORE
  std::string label;                             // --label (owner label)
  // RetryInterval from the config file (cli/config.h): the client's retry
  // pause; unset = the library default.
  std::optional<std::chrono::milliseconds> retry_interval;
  // --timeout / Timeout: ClientOptions::request_timeout, and the bound of
  // every command's store calls (StoreDeadline).
  std::string timeout_text = "5s";
  std::chrono::milliseconds timeout{5'000};
};

// One subcommand: its CLI11 node and the action to run once parsed.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_run_command(CLI::App& app, const Globals& globals,
                        const std::vector<std::string>& trailing);
Command add_elect_command(CLI::App& app, const Globals& globals,
                          const std::vector<std::string>& trailing);
Command add_acquire_command(CLI::App& app, const Globals& globals);
Command add_extend_command(CLI::App& app, const Globals& globals);
Command add_release_command(CLI::App& app, const Globals& globals);
Command add_status_command(CLI::App& app, const Globals& globals);
Command add_counter_command(CLI::App& app, const Globals& globals);
Command add_leader_command(CLI::App& app, const Globals& globals);
Command add_bench_command(CLI::App& app, const Globals& globals);
Command add_stores_command(CLI::App& app);

// The exit code documented for an error code.
int exit_code_for(Errc code) noexcept;

// Prints "baton: <errc>: <message>" (and who holds the lock, for
// not_acquired and timeout) to stderr; returns exit_code_for(error.code()).
int report(const Error& error);
// Prints "baton: <errc>: <message>" for a CLI-level problem; returns the
// exit code for `code`.
int report(Errc code, std::string_view message);
// run / elect: the command could not be started. With exit_code 126 or
// 127 prints "baton: cannot run "<cmd>": <reason>" (no error code: the
// exit status is the shell's, not one of baton's) and returns exit_code;
// otherwise report(error).
int report_cannot_run(const Error& error, int exit_code);

// Parses a duration flag ("500ms", "30s", "2m"). `allow_forever` accepts
// "forever" (and "inf") as milliseconds::max(). The error names the flag.
Result<std::chrono::milliseconds> parse_duration_flag(std::string_view flag,
                                                      std::string_view text,
                                                      bool allow_forever);

// --ttl and --wait of a lock command, parsed and validated together with
// the lock name, capacity and --label (the block `acquire` and `run` share).
struct LockFlags {
  std::chrono::milliseconds ttl{0};
  std::chrono::milliseconds wait{0};
};
Result<LockFlags> parse_lock_flags(const Globals& globals,
                                   std::string_view lock,
                                   std::string_view ttl_text,
                                   std::string_view wait_text,
                                   std::uint32_t capacity);

// A `timeout` of a blocking acquire of `lock`, with the lock's current
// holders attached (asked with describe(); unchanged if that fails), so
// that the report names who kept the lock.
Error with_holders_of(const Client& client, std::string_view lock, Error error);

// Opens the store named by --store with --label and --timeout, and
// `observer` as ClientOptions::observer (run/elect's --metrics-file and
// --events).
Result<Client> open_client(const Globals& globals,
                           std::shared_ptr<Observer> observer = nullptr);

// The store of a URL, for messages: "batond at 127.0.0.1:7420",
// "PostgreSQL at db:5432", "the memory: store". Never shows a password.
std::string describe_store(std::string_view url);

// The CLI's bound on store calls: "every command ends within wait +
// timeout". While a StoreDeadline lives, a background thread waits; if it
// is still alive `wait + timeout + kStoreDeadlineSlack` after construction,
// it prints "baton: unavailable: no answer from <store> within <timeout>"
// (and `what_then`, if any) and ends the process at once with `exit_code`.
// The client library bounds each call by the same timeout and normally
// answers first; this is the backstop. wait = milliseconds::max(): none.
inline constexpr std::chrono::milliseconds kStoreDeadlineSlack{500};
class StoreDeadline {
 public:
  StoreDeadline(const Globals& globals, std::chrono::milliseconds wait,
                std::string what_then = "", int exit_code = kExitUnavailable);
  ~StoreDeadline();
  StoreDeadline(const StoreDeadline&) = delete;
  StoreDeadline& operator=(const StoreDeadline&) = delete;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// Flushes stdout and stderr and ends the process now, without running
// destructors: after a lease is lost nothing may wait for a store that
// does not answer (the keeper's release, the elector's thread). Runs the
// exit hook first.
[[noreturn]] void exit_now(int code);

// The last words of a process that ends at once (exit_now, StoreDeadline's
// forced exit): e.g. writing run's --metrics-file. Must not wait for a
// store. It runs at most once, under a mutex that set_exit_hook() also
// takes, so clearing it (nullptr) waits for a call in progress. One hook
// at a time.
void set_exit_hook(std::function<void()> hook);

// run / elect: the lease (`what`: "lease on m", "leadership of g") was gone
// before the command could start: prints why (`reason`, the loss notice's;
// empty: the local safe deadline passed) and exits 76 at once.
[[noreturn]] void exit_lost_before_start(const std::string& what,
                                         const std::string& reason);

// --grace of run / elect: "auto" = min(10s, TTL/3, (TTL - renew)/2), or a
// duration that leaves room for renewals: grace < TTL - renew interval
// (the command gets SIGTERM at the safe deadline minus grace, and the
// deadline only moves when a renewal succeeds).
Result<std::chrono::milliseconds> parse_grace(
    std::string_view text, std::chrono::milliseconds ttl,
    std::chrono::milliseconds renew_interval);

// After the grant: `grace` (parsed from `text`) against the lease's real
// window, from now to its safe `deadline`, which a store may make shorter
// than the TTL (zookeeper:// caps it by its session timeout). "auto" is
// computed again from the window; an explicit grace that leaves no room for
// renewals (every `renew_interval`, 0 = a third of the window) is refused,
// naming `store`.
Result<std::chrono::milliseconds> fit_grace(
    std::string_view text, std::chrono::milliseconds grace,
    std::chrono::milliseconds ttl, std::chrono::milliseconds renew_interval,
    std::chrono::steady_clock::time_point deadline, std::string_view store);

// "30s", "1500ms", "forever".
std::string format_wait(std::chrono::milliseconds d);
// Human rendering rounded for people: "12s", "3m04s", "1h02m", "850ms".
std::string format_human(std::chrono::milliseconds d);
// 1 -> "1st", 2 -> "2nd", 11 -> "11th", 23 -> "23rd".
std::string ordinal(std::size_t n);
// A JSON string literal (with quotes) for arbitrary bytes: escapes quotes,
// backslashes and control characters; invalid UTF-8 bytes become U+FFFD.
std::string json_string(std::string_view s);

}  // namespace baton::cli

#endif  // BATON_CLI_CLI_H_
