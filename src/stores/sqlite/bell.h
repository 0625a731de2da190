// stores/sqlite/bell.h — waking waiters of every process on the host
// without a busy loop.
//
// Next to the database lives "<path>-baton-bell", an 8-byte file. A call
// that frees capacity or withdraws a request (release, withdrawal, a
// timed-out waiter leaving) writes a new generation into it after its
// COMMIT; each process has one inotify watch on it (one thread per database
// per process) and rings its in-process bell (`local`), on which its
// waiters nap; they then look at the tables with a read-only transaction
// (WAL readers never wait for the writer). If the
// bell file cannot be created (a read-only directory), waiters fall back to
// their jittered re-check timer alone. The bell file is created with the
// store's file_mode (files.h) and never through a symbolic link.
//
// The same thread checkpoints the WAL (PASSIVE, then TRUNCATE, on a
// connection of its own) once it passes 4 MB, so that no store call pays
// for a checkpoint inside its COMMIT and the WAL does not grow without
// bound under steady readers (SQLite's own auto-checkpoint, raised to
// 40 MB, is the net).
//
// Thread safety: safe for concurrent use.
#ifndef BATON_STORES_SQLITE_BELL_H_
#define BATON_STORES_SQLITE_BELL_H_

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "stores/sqlite/db.h"
#include "stores/sqlite/files.h"
#include "stores/sqlstep/sql_request.h"

namespace baton::store::sq {

// A FIFO turn with a deadline: threads get it in the order they asked
// (std::timed_mutex is not fair, and under load a thread could wait past
// its request deadline while later ones go first).
class FifoTurn {
 public:
  // True once it is this thread's turn; false (and out of the line) when
  // `deadline` passes first.
  bool lock_until(TimePoint deadline);
  void unlock();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool busy_ = false;               // guarded by mu_
  std::deque<std::uint64_t> line_;  // guarded by mu_
  std::uint64_t next_ = 0;          // guarded by mu_
};

class Bell {
 public:
  // Opens (creating it with `files.mode`, past the umask) the bell file.
  Bell(const std::string& db_path, const FilePolicy& files);
  ~Bell();
  Bell(const Bell&) = delete;
  Bell& operator=(const Bell&) = delete;

  // Wakes this process's waiters and, through the file, every other
  // process's.
  void ring();

  // This process's waiters nap here; the watcher rings it when another
  // process rings the file.
  sqlstep::LocalBell local;

  // Writers of this process take turns here before BEGIN IMMEDIATE, so
  // that its threads queue on a mutex instead of polling SQLite's write
  // lock against each other (the busy handler is left for other
  // processes).
  FifoTurn writer;

 private:
  void watch();
  void maybe_checkpoint();

  std::atomic<std::uint64_t> gen_{0};  // the last generation written
  int file_fd_ = -1;
  int inotify_fd_ = -1;
  int stop_fd_ = -1;  // eventfd that ends the watcher
  pid_t owner_ = 0;   // the process that made it (and its watcher)
  std::unique_ptr<std::thread> watcher_;
  std::string db_path_;
  std::unique_ptr<Conn> ckpt_;  // the watcher's own connection
  TimePoint last_ckpt_{};
};

// The process's bell for `db_path` (shared by every store of this process
// on that file; a forked child gets its own). `files` applies when the bell
// file is created.
std::shared_ptr<Bell> bell_for(const std::string& db_path,
                               const FilePolicy& files);

}  // namespace baton::store::sq

#endif  // BATON_STORES_SQLITE_BELL_H_
