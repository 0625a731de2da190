// tests/redis/redis_process.h — private redis-server processes for tests:
// each on a free loopback port in its own temp dir, persistence off unless
// asked, stopped by pid (never by name). With RedisTls, port() is a TLS port
// (client certificates optional) and plain_port() a plain one on the same
// server, bound to 127.0.0.1 and 127.0.0.2 (an address its certificate may
// not name).
#ifndef BATON_TESTS_REDIS_REDIS_PROCESS_H_
#define BATON_TESTS_REDIS_REDIS_PROCESS_H_

#include <hiredis/hiredis.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "baton/client.h"
#include "baton/store_descriptor.h"
#include "child_process.h"

namespace baton::testing {

inline std::uint16_t free_port() { return free_loopback_port(); }

// PEM files for a TLS redis-server.
struct RedisTls {
  std::string cert, key, ca;
};

class RedisProcess {
 public:
  // `persistent`: appendonly yes + appendfsync always. `keyspace_events`:
  // notify-keyspace-events K$gx, what the stores' change feed needs
  // (src/stores/redis/watch.h); off, watch() answers no feed.
  // `env`: variables of the server's environment (server_clock.h's).
  explicit RedisProcess(
      bool persistent = false, const RedisTls* tls = nullptr,
      bool keyspace_events = true,
      std::vector<std::pair<std::string, std::string>> env = {})
      : persistent_(persistent),
        keyspace_events_(keyspace_events),
        env_(std::move(env)) {
    char tmpl[] = "/tmp/baton-redis-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    port_ = free_port();
    if (tls != nullptr) {
      tls_ = *tls;
      plain_port_ = free_port();
    }
    start();
  }
  ~RedisProcess() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  void start() {
    std::vector<std::string> args = {"/usr/bin/redis-server",
                                     "--port",
                                     std::to_string(port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--dir",
                                     dir_,
                                     "--save",
                                     "",
                                     "--appendonly",
                                     persistent_ ? "yes" : "no",
                                     "--appendfsync",
                                     "always",
                                     "--logfile",
                                     dir_ + "/redis.log",
                                     "--notify-keyspace-events",
                                     keyspace_events_ ? "K$gx" : ""};
    if (!tls_.cert.empty()) {
      args[2] = std::to_string(plain_port_);
      args[4] = "127.0.0.1 127.0.0.2";
      for (const std::string& a :
           {std::string("--tls-port"), std::to_string(port_),
            std::string("--tls-cert-file"), tls_.cert,
            std::string("--tls-key-file"), tls_.key,
            std::string("--tls-ca-cert-file"), tls_.ca,
            std::string("--tls-auth-clients"), std::string("optional")}) {
        args.push_back(a);
      }
    }
    // Never outlives the test, never holds its stdout open.
    pid_ =
        spawn_logged(args, dir_ + "/stdout.log", /*ignore_sigint=*/false, env_);
    if (pid_ < 0) throw std::runtime_error("fork failed");
    for (int i = 0; i < 500; ++i) {
      if (ping()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("redis-server did not start on port " +
                             std::to_string(port_));
  }
  bool ping() const {
    timeval tv{0, 200000};
    redisContext* c = redisConnectWithTimeout(
        "127.0.0.1", tls_.cert.empty() ? port_ : plain_port_, tv);
    bool ok = false;
    if (c != nullptr && c->err == 0) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
      ok = r != nullptr && r->type == REDIS_REPLY_STATUS;
      if (r != nullptr) freeReplyObject(r);
    }
    if (c != nullptr) redisFree(c);
    return ok;
  }
  // SET key value on the plain port; false if it was not stored.
  bool set(const std::string& key, const std::string& value) const {
    timeval tv{1, 0};
    redisContext* c = redisConnectWithTimeout(
        "127.0.0.1", tls_.cert.empty() ? port_ : plain_port_, tv);
    bool ok = false;
    if (c != nullptr && c->err == 0) {
      auto* r = static_cast<redisReply*>(redisCommand(
          c, "SET %b %b", key.data(), key.size(), value.data(), value.size()));
      ok = r != nullptr && r->type == REDIS_REPLY_STATUS;
      if (r != nullptr) freeReplyObject(r);
    }
    if (c != nullptr) redisFree(c);
    return ok;
  }
  void stop() { stop_child(pid_, std::chrono::seconds(10)); }
  void kill9() { kill_child(pid_); }
  // Deletes what the server persisted (its append-only files): the next
  // start() is a server that lost its data. Call it while the server is
  // down.
  void wipe() {
    std::error_code ec;
    std::filesystem::remove_all(dir_ + "/appendonlydir", ec);
    std::filesystem::remove(dir_ + "/dump.rdb", ec);
  }
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }
  bool running() const { return pid_ > 0; }

  std::uint16_t port() const { return port_; }  // the TLS port with RedisTls
  std::uint16_t plain_port() const { return plain_port_; }
  std::string hostport() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string url() const { return "redis://" + hostport(); }

 private:
  bool persistent_;
  bool keyspace_events_;
  std::vector<std::pair<std::string, std::string>> env_;
  std::string dir_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
  RedisTls tls_;                  // cert empty: no TLS
  std::uint16_t plain_port_ = 0;  // with TLS: the plain port (ping)
};

// Opens a redis://, rediss:// or redlock:// store through the registry.
inline Result<std::shared_ptr<Store>> open_store(const std::string& url) {
  auto s = baton::open_store(url);
  if (!s.ok()) return std::move(s).error();
  return std::shared_ptr<Store>(std::move(*s));
}

inline Result<Client> open_client(const std::string& url,
                                  const ClientOptions& options = {}) {
  auto s = open_store(url);
  if (!s.ok()) return std::move(s).error();
  return Client::wrap(*s, options);
}

// A lease of `name` under `token`, as release() takes it (a request that a
// release withdraws, or a lease another client holds).
inline Lease lease_of(const std::string& name, const OwnerToken& token) {
  Lease l;
  l.name = name;
  l.token = token;
  return l;
}

inline std::string redlock_url(
    const std::vector<std::unique_ptr<RedisProcess>>& servers,
    const std::string& query = "") {
  std::string url = "redlock://";
  for (std::size_t i = 0; i < servers.size(); ++i) {
    if (i > 0) url += ",";
    url += servers[i]->hostport();
  }
  return url + query;
}

}  // namespace baton::testing

#endif  // BATON_TESTS_REDIS_REDIS_PROCESS_H_
