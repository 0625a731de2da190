// server/acl.h — batond's users and per-prefix rules (docs/server.md,
// "Users and rules"): a user's password is kept as a PBKDF2-HMAC-SHA256
// hash (batond --hash-password makes one); each rule grants permissions on
// the lock and counter names that start with its prefix.
//
//   read     LOCK.DESCRIBE, LOCK.LIST (entries under the prefix only)
//   lock     LOCK.ACQUIRE, LOCK.EXTEND, LOCK.RELEASE, ACQUIRE_SOME/ALL
//   counter  COUNTER.GET, COUNTER.ADD, COUNTER.TAKE
//   admin    INFO, GET /metrics (needs admin on the prefix "")
//
// Thread safety: pure functions over immutable values.
#ifndef BATON_SERVER_ACL_H_
#define BATON_SERVER_ACL_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"

namespace baton::server {

enum Perm : unsigned { kRead = 1, kLock = 2, kCounter = 4, kAdmin = 8 };

struct AclRule {
  std::string prefix;
  unsigned perms = 0;
};

struct User {
  std::string name;
  std::string password_hash;  // pbkdf2-sha256$<iterations>$<salt>$<hash>
  // A TLS client whose verified certificate has this subject CN is this
  // user without AUTH (empty: none).
  std::string client_cert_cn;
  std::vector<AclRule> rules;
};

// "read" -> kRead, ...; invalid_argument naming the word otherwise.
Result<unsigned> parse_perm(std::string_view word);
const char* perm_name(unsigned perm);

// A new hash with a random salt (iterations: PBKDF2 rounds).
Result<std::string> hash_password(std::string_view password,
                                  int iterations = 100'000);
// invalid_argument if `hash` is not in the format hash_password makes.
Status check_hash_format(const std::string& hash);
// Whether `password` matches `hash` (the comparison takes constant time).
bool verify_password(const std::string& hash, std::string_view password);
// A fast digest (SHA-256 of hash || password) batond keeps, in memory only,
// for passwords it has verified, so that later AUTHs skip PBKDF2.
std::string quick_digest(const std::string& hash, std::string_view password);
// Constant-time equality of two strings of the same length (false if the
// lengths differ).
bool equal_constant_time(std::string_view a, std::string_view b);

// The user `name` if `password` is its password, else null. An unknown
// user costs the same PBKDF2 work as a wrong password. `cache` (user name
// -> quick_digest of the password last verified for it, in memory only)
// lets a password seen before skip PBKDF2.
const User* authenticate(const std::vector<User>& users,
                         std::map<std::string, std::string>& cache,
                         std::string_view name, std::string_view password);

// The permissions `user` has on the name `name` (every rule whose prefix
// starts it).
unsigned perms_on(const User& user, std::string_view name);
// Whether LOCK.LIST of `prefix` may show anything: a rule with read covers
// the prefix, or lies under it (the listing is then filtered).
bool may_list(const User& user, std::string_view prefix);
// "\"jobs/\" (read, lock)", ... for error messages.
std::string describe_rules(const User& user);

}  // namespace baton::server

#endif  // BATON_SERVER_ACL_H_
