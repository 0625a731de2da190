// tests/torture/resource.h — the guarded resource, hosted by the
// orchestrator on a Unix socket. Each lock name guards one resource; a
// write "W <worker> <seq> <lock> <fencing>" is judged by baton's
// FencedResource (include/baton/fence.h) and answered "A" (accepted) or
// "R" (rejected). Every write is recorded, in the order the resource
// decided it. With fencing off (the negative control) every write is
// accepted, and recorded the same way.
//
// Thread safety: start/stop from one thread; writes() after stop().
#ifndef BATON_TESTS_TORTURE_RESOURCE_H_
#define BATON_TESTS_TORTURE_RESOURCE_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "baton/fence.h"
#include "torture.h"

namespace baton::torture {

class GuardedResource {
 public:
  // `pg_conninfo` (postgres runs): also ask the store's SQL helper
  // baton.fenced_write for every write, and record its answer.
  GuardedResource(std::string socket_path, bool fencing,
                  std::string pg_conninfo = "");
  ~GuardedResource();
  GuardedResource(const GuardedResource&) = delete;
  GuardedResource& operator=(const GuardedResource&) = delete;

  // Listens; false (with errno set) if the socket cannot be bound.
  bool start();
  void stop();
  std::vector<Write> writes() const;

 private:
  void accept_loop();
  void serve(int fd);
  char judge(const std::string& line);

  char ask_sql(const Write& w);  // called with mu_ held

  std::string path_;
  bool fencing_;
  std::string pg_conninfo_;
  void* pg_ = nullptr;  // PGconn*, guarded by mu_
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::vector<std::thread> conns_;                              // guarded
  std::map<std::string, std::unique_ptr<FencedResource>> res_;  // guarded
  std::vector<Write> writes_;                                   // guarded
};

}  // namespace baton::torture

#endif  // BATON_TESTS_TORTURE_RESOURCE_H_
