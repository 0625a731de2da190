// stores/sqlstep/sql_store.cc — see sql_store.h.
#include "stores/sqlstep/sql_store.h"

namespace baton::store::sqlstep {

Result<LockInfo> StepStore::describe(std::string_view name,
                                     const CallContext& ctx) {
  auto r = infos(ctx, {std::string(name)});
  if (!r.ok()) return std::move(r).error();
  return r->front();
}

Result<std::vector<LockInfo>> StepStore::in_use(
    const CallContext& ctx, const std::vector<std::string>& names) {
  if (names.empty()) return std::vector<LockInfo>{};
  auto r = infos(ctx, names);
  if (!r.ok()) return std::move(r).error();
  std::vector<LockInfo> out;
  for (auto& i : *r) {
    if (!i.holders.empty() || !i.waiters.empty()) out.push_back(std::move(i));
  }
  return out;
}

bool valid_identifier(std::string_view s, std::size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
  }
  return true;
}

std::vector<OptionSpec> step_options(const std::string& recheck_default,
                                     const std::string& recheck_help) {
  OptionSpec recheck = recheck_interval_option(recheck_default);
  recheck.help = recheck_help;
  recheck.aliases = {"recheck_max"};
  OptionSpec max_idle = count_option(
      "max_idle_connections", "16", 0,
      "idle connections kept open (at most " + std::to_string(kMaxCount) + ")");
  max_idle.aliases = {"max_idle"};
  return {
      prefix_option("baton_",
                    "table name prefix ([a-z0-9_]+, at most 32 bytes)"),
      request_timeout_option("5s"),
      duration_option("waiter_timeout", "5s",
                      "a waiter that has not looked for this long leaves "
                      "the queue"),
      recheck,
      max_idle,
  };
}

}  // namespace baton::store::sqlstep
