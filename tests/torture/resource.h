// tests/torture/resource.h — the guarded resource, hosted by the
// orchestrator on a Unix socket. Each lock name guards one resource; a
// write "W <worker> <seq> <lock> <fencing>" is judged by baton's
// FencedResource (include/baton/fence.h) and answered "A" (accepted) or
// "R" (rejected). Every write is recorded, in the order the resource
// decided it. With fencing off (the negative control) every write is
// accepted, and recorded the same way.
//
// Read-write locks (rule 18): a write stays in progress from its accepted
// "W" line until the writer's "E <worker> <seq> <lock> <fencing>" line; a
// shared holder reads with "D <worker> <seq> <lock> <fencing>". A read is
// fenced against the last accepted write (a lower token: "R", a stale
// reader) and raises the token a later write must reach (a writer older
// than an accepted read: "R"). An accepted read during a write in progress
// is recorded with the writer (checker 9), as is a write with a token that
// a shared holder read with.
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
  struct ReadWrite {
    std::uint64_t highest_read = 0;
    bool writing = false;                    // a write in progress
    Write write;                             // ... this one
    std::vector<std::uint64_t> read_tokens;  // tokens shared holders used
  };
  std::map<std::string, ReadWrite> rw_;  // guarded
};

}  // namespace baton::torture

#endif  // BATON_TESTS_TORTURE_RESOURCE_H_
