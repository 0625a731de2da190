// stores/sqlite/sqlite_store.h — the sqlite:// store: baton's contract
// between processes of one host, with no server (a file they all open).
//
//   sqlite:///abs/path/locks.db?prefix=baton_&request_timeout=5s
//       &waiter_timeout=5s&recheck_interval=100ms&max_idle_connections=16
//       &file_mode=0600&allow_insecure_files=0
//   sqlite://./relative/locks.db       (relative to the working directory)
//   sqlite:/abs/path/locks.db          (the opaque form)
//
// The options are the descriptor's (sqlite_descriptor(); docs/stores/
// sqlite.md has the table); the shared URL parser reads the file path.
//
// The file is created on first use; WAL mode, synchronous=FULL; every
// change is one BEGIN IMMEDIATE transaction (the scheduling step of the
// other SQL stores, computed in C++ under the database's write lock), its
// busy handler bounded by the call's deadline and request_timeout (rule 7).
//
// Store time is this host's CLOCK_MONOTONIC (a wall-clock step never moves
// it); the database records the boot id, and a new boot id means every
// lease and queued request has expired (fencing high-water marks and
// counters survive). Waiters are woken through an inotify bell file next to
// the database (stores/sqlite/bell.h: their wait_change), and look again
// at the next instant a pass could change something, with a jittered
// re-check as the fallback. The files are private to their owner
// (file_mode), and a database other users could write or replace is
// refused (stores/sqlite/files.h). See docs/stores/sqlite.md.
//
// Thread safety: safe for concurrent use (Store contract); a store must not
// be used across fork() (open a new one in the child).
#ifndef BATON_STORES_SQLITE_SQLITE_STORE_H_
#define BATON_STORES_SQLITE_SQLITE_STORE_H_

#include <chrono>
#include <string>

#include "baton/store_descriptor.h"

namespace baton::store {

namespace sq {
using std::chrono::milliseconds;

struct StoreOptions {
  std::string path;  // absolute
  std::string prefix = "baton_";
  int max_idle = 16;
  milliseconds request_timeout{5000};
  milliseconds waiter_timeout{5000};  // heartbeat timeout of waiters
  milliseconds recheck{100};          // fallback re-check of waiters
  // Permission bits of every file the store or SQLite creates (files.h).
  unsigned file_mode = 0600;
  // Use files and directories other users may write, knowingly.
  bool allow_insecure_files = false;
};

inline constexpr int kSchemaVersion = 2;
}  // namespace sq

// sqlite://: its options, and an open function that opens (creating if
// needed) the file and installs or checks the schema.
const StoreDescriptor& sqlite_descriptor();

}  // namespace baton::store

#endif  // BATON_STORES_SQLITE_SQLITE_STORE_H_
