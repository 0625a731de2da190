// cli/cli.cc — shared helpers of the `baton` command-line tool.
#include "cli/cli.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "baton/duration.h"
#include "baton/validate.h"

namespace baton::cli {

using std::chrono::milliseconds;

int exit_code_for(Errc code) noexcept {
  switch (code) {
    case Errc::not_acquired:
    case Errc::timeout:
      return kExitNotAcquired;
    case Errc::lock_lost:
      return kExitLeaseLost;
    case Errc::invalid_argument:
    case Errc::unsupported:
      return kExitUsage;
    case Errc::unavailable:
      return kExitUnavailable;
    case Errc::permission_denied:
      return kExitPermission;
    case Errc::internal:
      return kExitInternal;
    case Errc::cancelled:
      return kExitCancelled;
  }
  return kExitInternal;
}

int report(Errc code, std::string_view message) {
  // One write: the command run by run/elect shares stderr, and a line of
  // its own ("Terminated") must not land inside ours.
  std::cerr << ("baton: " + std::string(errc_name(code)) + ": " +
                std::string(message) + "\n");
  return exit_code_for(code);
}

namespace {

// What report() knows about the store calls of the running command (set
// by StoreDeadline; main thread only).
struct CliCallContext {
  bool active = false;
  std::chrono::steady_clock::time_point start;
  milliseconds wait{0};
  milliseconds timeout{0};
  std::string store;  // describe_store()
};
CliCallContext g_call_context;

std::string no_answer(const std::string& store, milliseconds timeout,
                      milliseconds wait) {
  std::string m = "no answer from " + store + " within " +
                  format_duration(timeout) + " (--timeout)";
  if (wait > milliseconds::zero()) {
    m += " after the " + format_duration(wait) + " wait";
  }
  return m;
}

// An `unavailable` message that says which store, and, when the call ran
// out of time, that it did.
std::string unavailable_message(const std::string& message) {
  const CliCallContext& c = g_call_context;
  if (!c.active) return message;
  const auto elapsed = std::chrono::steady_clock::now() - c.start;
  if (c.wait != milliseconds::max() &&
      elapsed >= c.wait + c.timeout - c.timeout / 10) {
    // The library's own "no answer from <url> within <t>: " says the same.
    std::string cause = message;
    if (cause.rfind("no answer from ", 0) == 0) {
      if (auto p = cause.find(": "); p != std::string::npos) {
        cause = cause.substr(p + 2);
      }
    }
    return no_answer(c.store, c.timeout, c.wait) + ": " + cause;
  }
  const std::size_t at = c.store.find(" at ");
  const std::string address =
      at == std::string::npos ? c.store : c.store.substr(at + 4);
  if (message.find(address) != std::string::npos) return message;
  return message + " (" + c.store + ")";
}

}  // namespace

int report(const Error& error) {
  int rc = report(error.code(), error.code() == Errc::unavailable
                                    ? unavailable_message(error.message())
                                    : error.message());
  if (error.code() == Errc::not_acquired || error.code() == Errc::timeout) {
    for (const HolderInfo& h : error.holders()) {
      std::cerr << "  held by " << (h.label.empty() ? "?" : h.label)
                << " (fencing " << h.fencing_token << ", "
                << format_human(h.time_left) << " left)\n";
    }
  }
  return rc;
}

int report_cannot_run(const Error& error, int exit_code) {
  if (exit_code != kExitCannotExec && exit_code != kExitNotFound) {
    return report(error);
  }
  std::cerr << "baton: " << error.message() << '\n';
  return exit_code;
}

Result<milliseconds> parse_duration_flag(std::string_view flag,
                                         std::string_view text,
                                         bool allow_forever) {
  if (allow_forever && (text == "forever" || text == "inf")) {
    return milliseconds::max();
  }
  auto d = parse_duration(text);
  if (!d) {
    std::string message = std::string(flag) + ": " + d.error().message();
    if (allow_forever) message += "; or \"forever\" to wait without end";
    return Error(Errc::invalid_argument, std::move(message));
  }
  return *d;
}

Result<LockFlags> parse_lock_flags(const Globals& globals,
                                   std::string_view lock,
                                   std::string_view ttl_text,
                                   std::string_view wait_text,
                                   std::uint32_t capacity) {
  auto ttl = parse_duration_flag("--ttl", ttl_text, false);
  if (!ttl) return ttl.error();
  auto wait = parse_duration_flag("--wait", wait_text, true);
  if (!wait) return wait.error();
  for (Status s : {validate_lock_name(lock), validate_ttl(*ttl),
                   validate_capacity(capacity), validate_wait(*wait),
                   validate_label(globals.label)}) {
    if (!s) return s.error();
  }
  return LockFlags{*ttl, *wait};
}

Error with_holders_of(const Client& client, std::string_view lock,
                      Error error) {
  if (error.code() != Errc::timeout || !error.holders().empty()) return error;
  auto info = client.describe(lock);
  if (info && !info->holders.empty()) {
    std::move(error).with_holders(info->holders);
  }
  return error;
}

Result<Client> open_client(const Globals& globals,
                           std::shared_ptr<Observer> observer) {
  ClientOptions options;
  options.observer = std::move(observer);
  options.label = globals.label;
  options.request_timeout = globals.timeout;
  if (globals.retry_interval) options.retry_interval = *globals.retry_interval;
  return Client::open(globals.store, options);
}

std::string describe_store(std::string_view url) {
  const std::size_t colon = url.find(':');
  const std::string scheme(url.substr(0, colon));
  if (colon == std::string_view::npos) return "the store " + scheme;
  if (url.substr(colon).rfind("://", 0) != 0)
    return "the " + scheme + ": store";
  std::string_view rest = url.substr(colon + 3);
  rest = rest.substr(0, std::min(rest.find('/'), rest.find('?')));
  if (std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
    rest.remove_prefix(at + 1);  // user:password@
  }
  std::string name = scheme;
  if (scheme == "baton") name = "batond";
  if (scheme == "postgres" || scheme == "postgresql") name = "PostgreSQL";
  if (scheme == "redis") name = "Redis";
  if (scheme == "redlock") name = "the Redlock servers";
  if (rest.empty()) return name;
  return name + " at " + std::string(rest);
}

namespace {

std::mutex g_exit_hook_mu;
std::function<void()> g_exit_hook;  // guarded by g_exit_hook_mu

void run_exit_hook() {
  std::lock_guard<std::mutex> lk(g_exit_hook_mu);
  std::function<void()> hook = std::move(g_exit_hook);
  g_exit_hook = nullptr;
  if (hook) hook();
}

}  // namespace

void set_exit_hook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lk(g_exit_hook_mu);
  g_exit_hook = std::move(hook);
}

struct StoreDeadline::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
};

StoreDeadline::StoreDeadline(const Globals& globals, milliseconds wait,
                             std::string what_then, int exit_code) {
  const auto now = std::chrono::steady_clock::now();
  const std::string store = describe_store(globals.store);
  g_call_context = CliCallContext{true, now, wait, globals.timeout, store};
  if (wait == milliseconds::max()) return;
  state_ = std::make_shared<State>();
  const auto until = now + wait + globals.timeout + kStoreDeadlineSlack;
  std::string message =
      "baton: unavailable: " + no_answer(store, globals.timeout, wait);
  if (!what_then.empty()) message += "; " + what_then;
  message += '\n';
  std::thread([state = state_, until, message, exit_code] {
    std::unique_lock<std::mutex> lk(state->mu);
    if (state->cv.wait_until(lk, until, [&] { return state->done; })) return;
    // write(2): the main thread may be stuck anywhere, even in iostream.
    ssize_t ignored = write(STDERR_FILENO, message.data(), message.size());
    (void)ignored;
    lk.unlock();
    run_exit_hook();
    std::_Exit(exit_code);
  }).detach();
}

StoreDeadline::~StoreDeadline() {
  g_call_context.active = false;
  if (!state_) return;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->done = true;
  }
  state_->cv.notify_all();
}

void exit_lost_before_start(const std::string& what,
                            const std::string& reason) {
  report(Errc::lock_lost,
         what + " lost before the command started (" +
             (reason.empty() ? "its local safe deadline passed" : reason) +
             ")");
  exit_now(kExitLeaseLost);
}

void exit_now(int code) {
  run_exit_hook();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

Result<milliseconds> parse_grace(std::string_view text, milliseconds ttl,
                                 milliseconds renew_interval) {
  const milliseconds room = ttl - renew_interval;
  if (text == "auto") {
    return std::max(milliseconds::zero(),
                    std::min({milliseconds(10'000), ttl / 3, room / 2}));
  }
  auto grace = parse_duration_flag("--grace", text, false);
  if (!grace) return grace.error();
  if (*grace >= room) {
    return Error(
        Errc::invalid_argument,
        "--grace " + format_duration(*grace) +
            " leaves no room for renewals with --ttl " + format_duration(ttl) +
            " (renewed every " + format_duration(renew_interval) +
            "): the command gets SIGTERM at the lease's safe deadline minus "
            "the grace, so the grace must be shorter than " +
            format_duration(room) +
            " (TTL - renew interval); use a longer --ttl or a shorter "
            "--grace (\"auto\" = min(10s, TTL/3))");
  }
  return *grace;
}

Result<milliseconds> fit_grace(std::string_view text, milliseconds grace,
                               milliseconds ttl, milliseconds renew_interval,
                               std::chrono::steady_clock::time_point deadline,
                               std::string_view store) {
  const auto left = std::chrono::floor<milliseconds>(
      deadline - std::chrono::steady_clock::now());
  const milliseconds window =
      std::max(milliseconds::zero(), std::min(ttl, left));
  if (window >= ttl) return grace;  // as parsed before the grant
  const milliseconds interval = renew_interval > milliseconds::zero()
                                    ? renew_interval
                                    : std::max(milliseconds(1), window / 3);
  const milliseconds room = window - interval;
  if (text == "auto") {
    return std::max(milliseconds::zero(),
                    std::min({milliseconds(10'000), window / 3, room / 2}));
  }
  if (grace < room) return grace;
  // The scheme only: a URL may carry a password.
  store = store.substr(0, std::min(store.size(), store.find(':')));
  return Error(
      Errc::invalid_argument,
      "--grace " + format_duration(grace) +
          " leaves no room for renewals: the " + std::string(store) +
          ":// store granted this lease for " + format_duration(window) +
          ", less than --ttl " + format_duration(ttl) +
          " (zookeeper:// caps a lease by its session timeout), renewed "
          "every " +
          format_duration(interval) + "; the grace must be shorter than " +
          format_duration(room) + ", or use --grace auto");
}

std::string format_wait(milliseconds d) {
  if (d == milliseconds::max()) return "forever";
  return format_duration(d);
}

std::string format_human(milliseconds d) {
  long long ms = d.count();
  if (ms < 0) ms = 0;
  char buf[64];
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%lldms", ms);
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof buf, "%llds", ms / 1000);
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", ms / 60'000, ms / 1000 % 60);
  } else if (ms < 86'400'000) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", ms / 3'600'000,
                  ms / 60'000 % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", ms / 86'400'000,
                  ms / 3'600'000 % 24);
  }
  return buf;
}

std::string ordinal(std::size_t n) {
  const char* suffix = "th";
  if (n % 100 < 11 || n % 100 > 13) {
    switch (n % 10) {
      case 1:
        suffix = "st";
        break;
      case 2:
        suffix = "nd";
        break;
      case 3:
        suffix = "rd";
        break;
      default:
        break;
    }
  }
  return std::to_string(n) + suffix;
}

std::string json_string(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        ++i;
        continue;
      case '\\':
        out += "\\\\";
        ++i;
        continue;
      case '\n':
        out += "\\n";
        ++i;
        continue;
      case '\r':
        out += "\\r";
        ++i;
        continue;
      case '\t':
        out += "\\t";
        ++i;
        continue;
      case '\b':
        out += "\\b";
        ++i;
        continue;
      case '\f':
        out += "\\f";
        ++i;
        continue;
      default:
        break;
    }
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      ++i;
      continue;
    }
    std::size_t len = utf8_sequence_length(s, i);
    if (len == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  out += '"';
  return out;
}

}  // namespace baton::cli
