#include "server/config.h"

#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/duration.h"

namespace baton::server {

Result<FsyncPolicy> parse_fsync(std::string_view text) {
  if (text == "always") return FsyncPolicy::always;
  if (text == "batch") return FsyncPolicy::batch;
  if (text == "never") return FsyncPolicy::never;
  return Error(Errc::invalid_argument,
               "fsync must be always, batch or never, not \"" +
                   std::string(text) + "\"");
}

namespace {

Status bad(const std::string& m) { return Error(Errc::invalid_argument, m); }

Result<std::chrono::milliseconds> duration_of(const YAML::Node& n) {
  return core::parse_duration(n.as<std::string>());
}

Result<std::string> read_secret(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error(Errc::invalid_argument, "cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// users: { name: { password_hash: ..., rules: { "prefix": [perm, ...] } } }
Status parse_users(const YAML::Node& n, std::vector<User>* users) {
  if (!n.IsMap()) return bad("users must be a map of user name to settings");
  for (const auto& u : n) {
    User user;
    user.name = u.first.as<std::string>();
    const std::string where = "users." + user.name;
    if (user.name.empty()) return bad("users: a user name is empty");
    if (!u.second.IsMap()) return bad(where + " must be a map");
    for (const auto& kv : u.second) {
      const std::string key = kv.first.as<std::string>();
      if (key == "password_hash") {
        user.password_hash = kv.second.as<std::string>();
        if (Status s = check_hash_format(user.password_hash); !s) {
          return bad(where + ": " + s.error().message());
        }
      } else if (key == "client_cert_cn") {
        user.client_cert_cn = kv.second.as<std::string>();
      } else if (key == "rules") {
        if (!kv.second.IsMap()) {
          return bad(where + ".rules must map a prefix to permissions");
        }
        for (const auto& r : kv.second) {
          AclRule rule;
          rule.prefix = r.first.as<std::string>();
          if (!r.second.IsSequence()) {
            return bad(where + ".rules.\"" + rule.prefix +
                       "\" must be a list of permissions");
          }
          for (const auto& w : r.second) {
            auto perm = parse_perm(w.as<std::string>());
            if (!perm) {
              return bad(where + ".rules.\"" + rule.prefix +
                         "\": " + perm.error().message());
            }
            rule.perms |= *perm;
          }
          user.rules.push_back(std::move(rule));
        }
      } else if (key == "password") {
        return bad(where +
                   ": plain-text passwords are not accepted; store "
                   "password_hash (batond --hash-password)");
      } else {
        return bad(where + ": unknown key \"" + key + "\"");
      }
    }
    if (user.password_hash.empty()) return bad(where + " has no password_hash");
    for (const auto& other : *users) {
      if (other.name == user.name) return bad(where + " is defined twice");
    }
    users->push_back(std::move(user));
  }
  return {};
}

bool is_loopback(const std::string& listen) {
  auto colon = listen.rfind(':');
  std::string host = listen.substr(0, colon);
  if (!host.empty() && host.front() == '[')
    host = host.substr(1, host.size() - 2);
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

Status load_config_file(const std::string& path, ServerConfig* c) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    return bad("cannot read config " + path + ": " + e.what());
  }
  if (!root.IsMap()) return bad("config " + path + " is not a YAML map");
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      if (key == "listen") {
        c->listen = v.as<std::string>();
      } else if (key == "metrics_listen") {
        c->metrics_listen = v.as<std::string>();
      } else if (key == "tls_listen") {
        c->tls_listen = v.as<std::string>();
      } else if (key == "tls_cert_file") {
        c->tls_cert_file = v.as<std::string>();
      } else if (key == "tls_key_file") {
        c->tls_key_file = v.as<std::string>();
      } else if (key == "tls_ca_file") {
        c->tls_ca_file = v.as<std::string>();
      } else if (key == "data_dir") {
        c->data_dir = v.as<std::string>();
      } else if (key == "fsync") {
        auto f = parse_fsync(v.as<std::string>());
        if (!f) return f.error();
        c->fsync = *f;
      } else if (key == "fsync_interval") {
        auto d = duration_of(v);
        if (!d) return d.error();
        c->fsync_interval = *d;
      } else if (key == "repair") {
        c->repair = v.as<bool>();
      } else if (key == "compact_factor") {
        c->compact_factor = v.as<double>();
      } else if (key == "compact_min_bytes") {
        c->compact_min_bytes = v.as<std::size_t>();
      } else if (key == "max_request_bytes") {
        c->max_request_bytes = v.as<std::size_t>();
      } else if (key == "max_args") {
        c->max_args = v.as<std::size_t>();
      } else if (key == "max_connections") {
        c->max_connections = v.as<std::size_t>();
      } else if (key == "max_waiters_per_lock") {
        c->max_waiters_per_lock = v.as<std::size_t>();
      } else if (key == "session_timeout") {
        auto d = duration_of(v);
        if (!d) return d.error();
        c->session_timeout = *d;
      } else if (key == "history_window") {
        auto d = duration_of(v);
        if (!d) return d.error();
        c->history_window = *d;
      } else if (key == "history_size") {
        c->history_size = v.as<std::size_t>();
      } else if (key == "requirepass") {
        c->requirepass = v.as<std::string>();
      } else if (key == "password_file") {
        auto s = read_secret(v.as<std::string>());
        if (!s) return s.error();
        c->requirepass = *s;
      } else if (key == "users") {
        c->users.clear();
        if (Status s = parse_users(v, &c->users); !s) {
          return bad("config " + path + ": " + s.error().message());
        }
      } else if (key == "auth_fail_delay") {
        auto d = duration_of(v);
        if (!d) return d.error();
        c->auth_fail_delay = *d;
      } else if (key == "allow_insecure_bind") {
        c->allow_insecure_bind = v.as<bool>();
      } else if (key == "log_level") {
        c->log_level = v.as<std::string>();
      } else {
        return bad("config " + path + ": unknown key \"" + key + "\"");
      }
    }
  } catch (const YAML::Exception& e) {
    return bad("config " + path + ": " + e.what());
  }
  return {};
}

bool parse_command_line(int argc, char** argv, ServerConfig* c, int* exit_code,
                        const std::string& version_text) {
  // --config is applied first, then every other flag overrides it.
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string_view(argv[i]) == "--config") {
      Status s = load_config_file(argv[i + 1], c);
      if (!s) {
        std::cerr << "batond: " << s.error().to_string() << "\n";
        *exit_code = 2;
        return false;
      }
    }
  }
  CLI::App app{"batond — the baton lock server (RESP2)"};
  if (!version_text.empty()) {
    app.set_version_flag("--version", version_text,
                         "Print the version, the commit it was built from "
                         "and what it serves, and exit");
  }
  bool hash_pw = false;
  app.add_flag("--hash-password", hash_pw,
               "read a password on stdin, print its password_hash, exit");
  std::string config_file, password_file, fsync, fsync_interval,
      session_timeout, history_window;
  app.add_option("--config", config_file, "YAML config file");
  app.add_option("--listen", c->listen, "host:port to serve RESP on");
  app.add_option("--metrics-listen", c->metrics_listen,
                 "host:port for Prometheus /metrics (off if empty)");
  app.add_option("--tls-listen", c->tls_listen,
                 "host:port to serve RESP over TLS on (off if empty)");
  app.add_option("--tls-cert-file", c->tls_cert_file,
                 "PEM certificate (chain) of the TLS listener");
  app.add_option("--tls-key-file", c->tls_key_file,
                 "PEM private key of the TLS listener");
  app.add_option("--tls-ca-file", c->tls_ca_file,
                 "PEM CA: TLS clients must present a certificate it signed");
  app.add_option("--data-dir", c->data_dir,
                 "journal directory ('' = no persistence)");
  app.add_option("--fsync", fsync, "always | batch | never");
  app.add_option("--fsync-interval", fsync_interval,
                 "least time between fsyncs for fsync: batch (default 0ms)");
  app.add_flag("--repair", c->repair,
               "start even if the journal or snapshot is corrupt: keep "
               "copies, restore what is valid, log what was dropped");
  app.add_option("--session-timeout", session_timeout,
                 "EPHEMERAL leases live this long after disconnect");
  app.add_option("--history-window", history_window,
                 "status page history: how far back (default 1h)");
  app.add_option("--history-size", c->history_size,
                 "status page history: most events kept (0 = none)");
  app.add_option("--max-connections", c->max_connections);
  app.add_option("--max-waiters-per-lock", c->max_waiters_per_lock);
  app.add_option("--max-request-bytes", c->max_request_bytes);
  app.add_option("--password-file", password_file,
                 "file holding the AUTH password");
  app.add_flag("--allow-insecure-bind", c->allow_insecure_bind,
               "allow a non-loopback listen address without a password");
  app.add_option("--log-level", c->log_level);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
    return false;
  }
  auto fail = [&](const Error& e) {
    std::cerr << "batond: " << e.to_string() << "\n";
    *exit_code = 2;
    return false;
  };
  if (hash_pw) {
    std::string pw;
    std::getline(std::cin, pw);
    while (!pw.empty() && pw.back() == '\r') pw.pop_back();
    auto h = hash_password(pw);
    if (!h) return fail(h.error());
    std::cout << *h << "\n";
    *exit_code = 0;
    return false;
  }
  if (!fsync.empty()) {
    auto f = parse_fsync(fsync);
    if (!f) return fail(f.error());
    c->fsync = *f;
  }
  if (!fsync_interval.empty()) {
    auto d = core::parse_duration(fsync_interval);
    if (!d) return fail(d.error());
    c->fsync_interval = *d;
  }
  if (!session_timeout.empty()) {
    auto d = core::parse_duration(session_timeout);
    if (!d) return fail(d.error());
    c->session_timeout = *d;
  }
  if (!history_window.empty()) {
    auto d = core::parse_duration(history_window);
    if (!d) return fail(d.error());
    c->history_window = *d;
  }
  if (!password_file.empty()) {
    auto s = read_secret(password_file);
    if (!s) return fail(s.error());
    c->requirepass = *s;
  }
  return true;
}

Status check_config(const ServerConfig& c) {
  if (!is_loopback(c.listen) && c.requirepass.empty() && c.users.empty() &&
      !c.allow_insecure_bind) {
    return bad("refusing to listen on non-loopback address " + c.listen +
               " without a password (set requirepass / --password-file, or "
               "--allow-insecure-bind)");
  }
  if (!c.tls_listen.empty() && !is_loopback(c.tls_listen) &&
      c.requirepass.empty() && c.users.empty() && c.tls_ca_file.empty() &&
      !c.allow_insecure_bind) {
    return bad("refusing to listen on non-loopback address " + c.tls_listen +
               " without a password or client certificates (set requirepass "
               "/ --password-file or tls_ca_file, or --allow-insecure-bind)");
  }
  const bool tls_files = !c.tls_cert_file.empty() || !c.tls_key_file.empty() ||
                         !c.tls_ca_file.empty();
  if (c.tls_listen.empty() && tls_files) {
    return bad(
        "tls_cert_file / tls_key_file / tls_ca_file are set but "
        "tls_listen is not");
  }
  if (!c.tls_listen.empty() &&
      (c.tls_cert_file.empty() || c.tls_key_file.empty())) {
    return bad("tls_listen " + c.tls_listen +
               " needs tls_cert_file and tls_key_file");
  }
  if (c.auth_fail_delay > std::chrono::seconds(10)) {
    return bad("auth_fail_delay > 10s");
  }
  if (c.max_request_bytes < 1024) return bad("max_request_bytes < 1024");
  if (c.max_args < 16) return bad("max_args < 16");
  if (c.fsync_interval > std::chrono::seconds(10)) {
    return bad("fsync_interval > 10s");
  }
  if (c.history_window < std::chrono::seconds(1) ||
      c.history_window > std::chrono::hours(24 * 7)) {
    return bad("history_window must be 1s .. 7d");
  }
  if (c.history_size > 10'000'000) return bad("history_size > 10000000");
  return {};
}

}  // namespace baton::server
