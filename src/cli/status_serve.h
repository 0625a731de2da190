// cli/status_serve.h — `baton status --serve` (the live status page of any
// store, fed by the store's change feed and polls) and `baton status --history`
// (a page server's history as text or JSON).
#ifndef BATON_CLI_STATUS_SERVE_H_
#define BATON_CLI_STATUS_SERVE_H_

#include <chrono>
#include <cstddef>
#include <string>

#include "baton/client.h"
#include "cli/cli.h"

namespace baton::cli {

struct ServeOptions {
  std::string listen;         // host:port
  bool serve_public = false;  // allow a non-loopback address
  std::string prefix;         // what is polled (empty: everything)
  // With push (the default) the store's change feed (Store::watch) wakes
  // the page between polls where the store has one; --interval is then
  // the longest time between two reads.
  bool push = true;
  std::chrono::milliseconds interval{1000};
  std::size_t history_size = 10'000;
  std::chrono::milliseconds history_window{3'600'000};
};

// Serves the page until SIGINT/SIGTERM; an exit code.
int serve_status_page(const Globals& globals, const Client& client,
                      const ServeOptions& options);
// Checks the address before anything is opened ("" if fine).
std::string check_serve_address(const std::string& listen, bool serve_public);

// Prints the history of `lock` from the page server at `from`
// (http://host:port); an exit code.
int print_history(const std::string& from, const std::string& lock, bool json,
                  std::chrono::milliseconds timeout);

}  // namespace baton::cli

#endif  // BATON_CLI_STATUS_SERVE_H_
