// stores/sqlite/files.h — who may touch the database's files.
//
// The database holds every holder's owner token: whoever can read it can
// release or extend another process's lease, whoever can write it (or
// replace it, or the -wal that SQLite replays into it) can forge holders.
// So the store's files are private to their owner (file_mode, 0600 by
// default; 0660 for a group of users sharing the locks), and a database
// that other users could write or replace is refused before anything is
// opened, created or written:
//   - the directory holding it (and, if the path goes through a symbolic
//     link, the directory of its target) may be written by nobody but its
//     owner (and the group, if file_mode grants the group). A sticky
//     world-writable directory such as /tmp is refused too: SQLite creates
//     and deletes <db>-wal and <db>-shm as connections come and go, and
//     any local user could create them first (SQLite opens an existing
//     -wal/-shm as it finds them);
//   - its ancestors may not be world-writable without the sticky bit
//     (anyone could rename the directory and put another in its place);
//   - the database and the files beside it (kBeside) that exist may not be
//     writable by other users (nor by the group unless file_mode grants
//     it), must be regular files (a file beside may not be a symbolic
//     link), and must be owned by this user or root (or, when file_mode
//     grants the group, by anyone: only the group can create files in a
//     directory that passed the check above).
// allow_insecure_files=1 skips all of this knowingly (and permits a
// file_mode with bits for other users).
//
// Files are created with file_mode whatever the umask: the database with
// O_CREAT|O_EXCL and fchmod before SQLite first opens it (SQLite's own
// default is 0644 minus the umask); SQLite then creates -wal, -shm and
// -journal with the database's mode (its unix VFS copies it and fchmods
// past the umask); the bell file is made here (open_beside). After a
// successful open, files this user owns are set to file_mode (an older
// build made them 0644), unless allow_insecure_files is set.
#ifndef BATON_STORES_SQLITE_FILES_H_
#define BATON_STORES_SQLITE_FILES_H_

#include <sys/types.h>

#include <string>

#include "baton/error.h"

namespace baton::store::sq {

struct FilePolicy {
  mode_t mode = 0600;           // permission bits of every file made
  bool allow_insecure = false;  // allow_insecure_files=1
};

// The suffixes of the files beside the database that the store (the bell)
// or SQLite (WAL, shared memory, rollback journal) create. SQLite's other
// files (temporary files, super-journals of multi-database transactions,
// which the store never runs) are not beside the database.
inline constexpr const char* kBeside[] = {"-wal", "-shm", "-journal",
                                          "-baton-bell"};

// Reads file_mode ("0600", "660"): three octal digits (a leading 0 allowed),
// read and write for the owner, no execute bits, no bits for other users
// unless `allow_insecure`. The error (invalid_argument) names the option.
Result<mode_t> parse_file_mode(const std::string& text, bool allow_insecure);

// Before anything is opened: refuses (permission_denied, naming the path,
// its mode or owner, and what another user could do) what the header
// comment lists, then creates the database with p.mode if it does not
// exist. A directory that does not exist is left for the caller to report.
// Nothing is created or changed when refused.
Status prepare_files(const std::string& db_path, const FilePolicy& p);

// After the database opened and its schema is in place: the database and
// the files beside it that this user owns get p.mode (not with
// p.allow_insecure: those files were accepted as they are).
void settle_modes(const std::string& db_path, const FilePolicy& p);

// Opens `file` read-write, creating it with p.mode (umask-proof) if absent;
// never follows a symbolic link. -1 (errno set) if it cannot.
int open_beside(const std::string& file, const FilePolicy& p);

}  // namespace baton::store::sq

#endif  // BATON_STORES_SQLITE_FILES_H_
