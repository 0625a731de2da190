// stores/redis/scripts.h — the Lua scripts of the redis:// and redlock://
// stores (internal). Each Store operation is one script, run as a function
// of one library (FCALL; FUNCTION LOAD when the server does not have it),
// or with EVALSHA (EVAL after NOSCRIPT) where functions are not allowed.
// See docs/stores/redis.md.
//
// Thread safety: scripts() returns immutable data.
#ifndef BATON_STORES_REDIS_SCRIPTS_H_
#define BATON_STORES_REDIS_SCRIPTS_H_

#include <string>

namespace baton::store::redis {

struct Script {
  const char* name;
  std::string text;      // the EVAL script
  std::string function;  // the same as a function of the library (FCALL)
  // Safe to run twice (lock scripts are, by owner token); a script that is
  // not (counter_add, counter_take) is never re-run after a reset.
  bool idempotent = true;
};

struct Scripts {
  Script acquire, extend, release, describe, list, multi, fence;
  Script counter_get, counter_add, counter_take;
  Script born;  // the age of the lock data under the prefix (restart_guard)
  // FUNCTION LOAD text registering every script as a function. Its name
  // and the function names carry a hash of the text, so two baton versions
  // on one server never replace each other's functions.
  std::string library;
};

// Shared Lua functions every lock script starts with: the per-call state
// (EVAL form or library form) followed by kPrelude.
extern const char* const kPreludeEval;
extern const char* const kPreludeLibrary;
extern const char* const kPrelude;

const Scripts& scripts();

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_SCRIPTS_H_
