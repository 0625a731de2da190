// stores/redis/scripts.h — the Lua scripts of the redis:// and redlock://
// stores (internal). Each Store operation is one script, run with EVALSHA
// (EVAL when the server answers NOSCRIPT). See docs/stores/redis.md.
//
// Thread safety: scripts() returns immutable data.
#ifndef BATON_STORES_REDIS_SCRIPTS_H_
#define BATON_STORES_REDIS_SCRIPTS_H_

#include <string>

namespace baton::store::redis {

struct Script {
  const char* name;
  std::string text;
};

struct Scripts {
  Script acquire, extend, release, describe, list, multi, fence;
  Script counter_get, counter_add, counter_take;
};

// Shared Lua functions every lock script starts with.
extern const char* const kPrelude;

const Scripts& scripts();

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_SCRIPTS_H_
