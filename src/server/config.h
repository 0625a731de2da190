// server/config.h — batond configuration: YAML file + command-line flags
// (flags override the file). Every key is documented in docs/server.md.
//
// Thread safety: plain values and pure functions.
#ifndef BATON_SERVER_CONFIG_H_
#define BATON_SERVER_CONFIG_H_

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "baton/error.h"
#include "server/acl.h"
#include "server/journal.h"

namespace baton::server {

struct ServerConfig {
  // host:port of the RESP listener; loopback by default.
  std::string listen = "127.0.0.1:7420";
  // host:port of the Prometheus /metrics HTTP listener; empty = off.
  std::string metrics_listen;
  // host:port of the TLS listener (beside `listen`); empty = off. Needs
  // tls_cert_file and tls_key_file; with tls_ca_file, clients must present
  // a certificate signed by that CA.
  std::string tls_listen;
  std::string tls_cert_file, tls_key_file, tls_ca_file;
  // Directory for the journal and snapshot; empty = no persistence.
  std::string data_dir = "batond-data";
  FsyncPolicy fsync = FsyncPolicy::batch;
  // fsync: batch starts an fsync at most once per interval (0 = as soon as
  // the previous one returned: back-to-back group commit).
  std::chrono::milliseconds fsync_interval{0};
  // Start even if the journal or snapshot is corrupt (see JournalOptions::
  // repair); otherwise batond refuses to start and leaves them untouched.
  bool repair = false;
  double compact_factor = 4.0;
  std::size_t compact_min_bytes = 1 << 20;
  // Largest request frame and most arguments per request.
  std::size_t max_request_bytes = 1 << 20;
  std::size_t max_args = 2048;
  std::size_t max_connections = 10'000;
  std::size_t max_waiters_per_lock = 100'000;
  // EPHEMERAL leases are freed this long after their connection closes.
  std::chrono::milliseconds session_timeout{10'000};
  // Password required by AUTH; empty = none. Never logged.
  std::string requirepass;
  // Users (AUTH user password) and their per-prefix rules; when set, every
  // connection must AUTH (docs/server.md, "Users and rules").
  std::vector<User> users;
  // A failed AUTH is answered this much later (brute-force brake).
  std::chrono::milliseconds auth_fail_delay{250};
  // Allow a non-loopback listen address without a password.
  bool allow_insecure_bind = false;
  // The status page's history of grants and ends: at most history_size
  // events (0 = no history), none older than history_window.
  std::size_t history_size = 10'000;
  std::chrono::milliseconds history_window{3'600'000};
  // trace, debug, info, warn, error, off.
  std::string log_level = "info";
};

// Applies a YAML file's keys to *config (unknown keys are an error).
Status load_config_file(const std::string& path, ServerConfig* config);
// Parses argv (including --config, applied first). Returns false with *exit
// set when the program should exit (help, --version, or an error already
// printed). `version_text` is what --version prints (no --version flag if
// empty).
bool parse_command_line(int argc, char** argv, ServerConfig* config,
                        int* exit_code, const std::string& version_text = "");
// Checks the combination (bind address vs password, ranges).
Status check_config(const ServerConfig& config);
Result<FsyncPolicy> parse_fsync(std::string_view text);

}  // namespace baton::server

#endif  // BATON_SERVER_CONFIG_H_
