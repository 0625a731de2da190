// tests/cli/guard_stores.cc — the stores of cli_guard_test (guard_stores.h).
#include "guard_stores.h"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "process.h"

namespace baton::testing {

namespace {

using namespace std::chrono_literals;

// One started store and what keeps it running.
struct Started {
  StoreUnderTest store;
  std::string dir;
  std::unique_ptr<Process> server;
  ~Started() {
    if (server) {
      server->signal(SIGCONT);
      server->signal(SIGTERM);
      server->wait(10s);
    }
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

std::unique_ptr<Started> start(const std::string& kind, std::string* error) {
  auto s = std::make_unique<Started>();
  s->store.name = kind;
  s->dir = make_temp_dir();
  if (kind == "sqlite") {
    s->store.url = "sqlite://" + s->dir + "/locks.db";
    return s;
  }
#ifdef BATOND_PATH
  if (kind == "batond") {
    const int port = free_port();
    s->server = std::make_unique<Process>(std::vector<std::string>{
        BATOND_PATH, "--listen", "127.0.0.1:" + std::to_string(port),
        "--data-dir", s->dir + "/data"});
    if (!wait_for_port(port, 10s)) {
      *error = "batond did not start: " + s->server->err();
      return nullptr;
    }
    s->store.url = "baton://127.0.0.1:" + std::to_string(port);
    s->store.pid = s->server->pid();
    return s;
  }
#endif
  *error = "no store kind \"" + kind + "\" in this build";
  return nullptr;
}

}  // namespace

std::vector<std::string> store_kinds() {
  std::vector<std::string> kinds = {"sqlite"};
#ifdef BATOND_PATH
  kinds.push_back("batond");
#endif
  return kinds;
}

const StoreUnderTest* store_under_test(const std::string& kind,
                                       std::string* error) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Started>> started;
  std::lock_guard<std::mutex> lock(mu);
  auto it = started.find(kind);
  if (it == started.end()) {
    auto s = start(kind, error);
    if (!s) return nullptr;
    it = started.emplace(kind, std::move(s)).first;
  }
  return &it->second->store;
}

}  // namespace baton::testing
