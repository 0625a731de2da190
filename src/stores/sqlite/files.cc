// stores/sqlite/files.cc — the database's files: refused when other users
// could write or replace them, created with file_mode (see files.h).
#include "stores/sqlite/files.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

namespace baton::store::sq {
namespace {

std::string octal(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

std::string dir_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::optional<std::string> real_path(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return std::nullopt;
  return std::string(buf);
}

// "alice (uid 1000)", or "uid 1000" for a uid with no name.
std::string who(uid_t uid) {
  const std::string id = "uid " + std::to_string(uid);
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 &&
      found != nullptr) {
    return std::string(found->pw_name) + " (" + id + ")";
  }
  return id;
}

// Who may own the files: "root", or "this user (alice, uid 1000) or root".
std::string may_own() {
  const uid_t me = ::geteuid();
  return me == 0 ? "root" : "this user (" + who(me) + ") or root";
}

// The group may write the files only when file_mode lets it: then the
// group shares the locks, and any of its members may have made a file.
bool group_shares(const FilePolicy& p) { return (p.mode & S_IWGRP) != 0; }

// An owner this process trusts: itself or root (who can do anything
// anyway), or, when the group shares the locks, any user (only the owner
// and the group can create files in a directory that passed dir_check).
bool trusted_owner(uid_t uid, const FilePolicy& p) {
  return uid == ::geteuid() || uid == 0 || group_shares(p);
}

const char* const kAccept = "allow_insecure_files=1 to accept it";

Error refuse(const std::string& db, const std::string& what) {
  return Error(Errc::permission_denied, "sqlite database \"" + db + "\": " +
                                            what + " (nothing was changed)");
}

// The directory holding the files: only its owner (and a sharing group)
// may write it, sticky or not.
std::optional<Error> dir_check(const std::string& db, const std::string& dir,
                               const struct stat& st, const FilePolicy& p) {
  const std::string named = "the directory \"" + dir + "\" ";
  const std::string own_dir =
      "; keep the database in a directory only you can write (mkdir -m "
      "0700), or give ";
  if ((st.st_mode & S_IWOTH) != 0) {
    const std::string why =
        (st.st_mode & S_ISVTX) != 0
            ? ": other users could create the database's -wal, -shm or bell "
              "file before this process does"
            : ": other users could replace the database";
    return refuse(
        db, named + "has mode " + octal(st.st_mode) + why + own_dir + kAccept);
  }
  if ((st.st_mode & S_IWGRP) != 0 && !group_shares(p)) {
    return refuse(db, named + "has mode " + octal(st.st_mode) +
                          ": its group could replace the database; chmod "
                          "g-w it, give file_mode=0660 if the group shares "
                          "the locks, or give " +
                          kAccept);
  }
  if (!trusted_owner(st.st_uid, p)) {
    return refuse(db, named + "is owned by " + who(st.st_uid) + ", not by " +
                          may_own() + ": its owner could replace the database" +
                          own_dir + kAccept);
  }
  return std::nullopt;
}

// The directories above it: not world-writable unless sticky (a sticky
// directory lets nobody but the owner rename what it holds).
std::optional<Error> ancestors_check(const std::string& db,
                                     const std::string& dir) {
  std::string d = dir;
  while (d != "/") {
    d = dir_of(d);
    struct stat st {};
    if (::stat(d.c_str(), &st) == 0 && (st.st_mode & S_IWOTH) != 0 &&
        (st.st_mode & S_ISVTX) == 0) {
      return refuse(db, "the directory \"" + d + "\" has mode " +
                            octal(st.st_mode) +
                            ": other users could rename what it holds and "
                            "put another database in its place; chmod o-w "
                            "(or +t) it, or give " +
                            kAccept);
    }
  }
  return std::nullopt;
}

// The database or a file beside it, as found (`st` from stat for the
// database, lstat for the files beside).
std::optional<Error> file_check(const std::string& db, const std::string& file,
                                const struct stat& st, const FilePolicy& p) {
  const std::string named = "the file \"" + file + "\" ";
  if (S_ISLNK(st.st_mode)) {
    return refuse(db,
                  named + "is a symbolic link; remove it, or give " + kAccept);
  }
  if (!S_ISREG(st.st_mode)) {
    return refuse(
        db, named + "is not a regular file; remove it, or give " + kAccept);
  }
  if ((st.st_mode & S_IWOTH) != 0) {
    return refuse(db, named + "has mode " + octal(st.st_mode) +
                          ": other users could write it and forge or free "
                          "holders; chmod 600 it, or give " +
                          kAccept);
  }
  if ((st.st_mode & S_IWGRP) != 0 && !group_shares(p)) {
    return refuse(db, named + "has mode " + octal(st.st_mode) +
                          ": its group could write it and forge or free "
                          "holders; chmod 600 it, give file_mode=0660 if the "
                          "group shares the locks, or give " +
                          kAccept);
  }
  if (!trusted_owner(st.st_uid, p)) {
    return refuse(db, named + "is owned by " + who(st.st_uid) + ", not by " +
                          may_own() +
                          ": its owner could change it at any "
                          "time; chown it, or give " +
                          kAccept);
  }
  return std::nullopt;
}

// The paths the files beside the database start with: the path as given
// (the bell file) and, through a symbolic link, its target (SQLite puts
// -wal, -shm and -journal beside the file it resolved).
std::vector<std::string> prefixes(const std::string& db_path) {
  std::vector<std::string> out{db_path};
  if (auto real = real_path(db_path); real && *real != db_path) {
    out.push_back(*real);
  }
  return out;
}

std::optional<Error> check_all(const std::string& db_path,
                               const FilePolicy& p) {
  std::vector<std::string> dirs;
  if (auto d = real_path(dir_of(db_path))) dirs.push_back(*d);
  if (auto real = real_path(db_path)) {
    const std::string d = dir_of(*real);
    if (dirs.empty() || dirs[0] != d) dirs.push_back(d);
  }
  for (const std::string& d : dirs) {
    struct stat st {};
    if (::stat(d.c_str(), &st) != 0) continue;
    if (auto e = dir_check(db_path, d, st, p)) return e;
    if (auto e = ancestors_check(db_path, d)) return e;
  }
  struct stat st {};
  if (::stat(db_path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    if (auto e = file_check(db_path, db_path, st, p)) return e;
  }
  for (const std::string& prefix : prefixes(db_path)) {
    for (const char* suffix : kBeside) {
      const std::string f = prefix + suffix;
      if (::lstat(f.c_str(), &st) != 0) continue;
      if (auto e = file_check(db_path, f, st, p)) return e;
    }
  }
  return std::nullopt;
}

}  // namespace

Result<mode_t> parse_file_mode(const std::string& text, bool allow_insecure) {
  auto bad = [&](const std::string& why) {
    return Error(Errc::invalid_argument,
                 "sqlite store URL: file_mode \"" + text + "\" " + why);
  };
  std::string digits = text;
  if (digits.size() == 4 && digits[0] == '0') digits.erase(0, 1);
  if (digits.size() != 3 ||
      digits.find_first_not_of("01234567") != std::string::npos) {
    return bad("must be three octal digits, such as 0600 or 0660");
  }
  const auto m = static_cast<mode_t>(std::strtoul(digits.c_str(), nullptr, 8));
  if ((m & 0600) != 0600) {
    return bad(
        "must let the owner read and write (the store writes every "
        "grant)");
  }
  if ((m & 0111) != 0) return bad("must have no execute bits");
  if ((m & 0007) != 0 && !allow_insecure) {
    return bad(
        "gives other users access to every holder's owner token; "
        "give allow_insecure_files=1 to accept it");
  }
  return m;
}

Status prepare_files(const std::string& db_path, const FilePolicy& p) {
  struct stat st {};
  // The caller reports a missing directory (naming it).
  if (::stat(dir_of(db_path).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return {};
  }
  const bool exists = ::lstat(db_path.c_str(), &st) == 0;
  if (exists && !p.allow_insecure && S_ISLNK(st.st_mode) &&
      ::stat(db_path.c_str(), &st) != 0) {
    // SQLite would create the target, in a directory not checked here.
    return refuse(db_path,
                  "it is a symbolic link to a file that does not "
                  "exist; give the path of the file itself");
  }
  if (!p.allow_insecure) {
    if (auto e = check_all(db_path, p)) return *e;
  }
  if (exists) return {};
  // O_EXCL: made here with file_mode, never an existing file reused;
  // fchmod: the umask may have taken bits off (file_mode=0660 under umask
  // 022), never added any.
  const int fd =
      ::open(db_path.c_str(),
             O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, p.mode);
  if (fd >= 0) {
    (void)::fchmod(fd, p.mode);
    ::close(fd);
    return {};
  }
  // Another process made it first: check what it made (a file being made
  // by a store has at most file_mode's bits, the umask only takes some off).
  if (errno == EEXIST && !p.allow_insecure) {
    if (auto e = check_all(db_path, p)) return *e;
  }
  // Any other failure (a read-only directory) is SQLite's to report.
  return {};
}

void settle_modes(const std::string& db_path, const FilePolicy& p) {
  if (p.allow_insecure) return;
  const uid_t me = ::geteuid();
  auto settle = [&](const std::string& f, const struct stat& st) {
    if (S_ISREG(st.st_mode) && st.st_uid == me &&
        (st.st_mode & 07777) != p.mode) {
      (void)::chmod(f.c_str(), p.mode);
    }
  };
  struct stat st {};
  if (::stat(db_path.c_str(), &st) == 0) settle(db_path, st);
  for (const std::string& prefix : prefixes(db_path)) {
    for (const char* suffix : kBeside) {
      const std::string f = prefix + suffix;
      if (::lstat(f.c_str(), &st) == 0) settle(f, st);
    }
  }
}

int open_beside(const std::string& file, const FilePolicy& p) {
  int fd = ::open(file.c_str(),
                  O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, p.mode);
  if (fd >= 0) {
    (void)::fchmod(fd, p.mode);  // past the umask
    return fd;
  }
  if (errno != EEXIST) return -1;
  fd = ::open(file.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  return fd;
}

}  // namespace baton::store::sq
