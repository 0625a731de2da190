// stores/mysql/doorbell_wait.cc — the mysql:// store's doorbells: taking
// one per request, keeping it with the lease, letting it go, and waiting in
// GET_LOCK on another's (see stores/mysql/doorbell.h).
#include <cstdio>
#include <vector>

#include "stores/mysql/store_impl.h"

namespace baton::store::my_impl {
namespace {

std::string key_of(const std::string& name, const std::string& token) {
  std::string k = name;
  k += '\0';
  k += token;
  return k;
}

// Leaked: a store destroyed during static destruction may still use them.
std::mutex& local_mu() {
  static auto* mu = new std::mutex();
  return *mu;
}
std::map<std::string, int>& local_names() {
  static auto* m = new std::map<std::string, int>();
  return *m;
}

}  // namespace

void doorbell_mark(const std::string& name, bool held) {
  std::lock_guard<std::mutex> lk(local_mu());
  auto& m = local_names();
  if (held) {
    ++m[name];
  } else if (auto it = m.find(name); it != m.end() && --it->second <= 0) {
    m.erase(it);
  }
}

bool doorbell_local(const std::string& name) {
  std::lock_guard<std::mutex> lk(local_mu());
  return local_names().count(name) != 0;
}

Doorbell MysqlStore::new_doorbell(const std::string& name,
                                  const std::string& token, SteadyTime d) {
  Doorbell bell;
  if (!o_.doorbell) return bell;
  {
    // A lease that has one already (rule 17's retry, a reentrant join by
    // the same token) keeps it.
    std::lock_guard<std::mutex> lk(kept_mu_);
    if (kept_.count(key_of(name, token)) != 0) return bell;
  }
  if (slots_.fetch_add(1) >= o_.max_doorbells) {
    slots_.fetch_sub(1);
    return bell;
  }
  bell.slots = &slots_;
  auto c = pool_.get(d);
  if (!c.ok()) return bell;  // the pass will say what is wrong
  bell.conn = std::move(*c);
  bell.name = my::doorbell_name(where_, o_.prefix, name, token);
  return bell;
}

void MysqlStore::settle(Doorbell bell, bool granted, const std::string& name,
                        const std::string& token, milliseconds ttl,
                        SteadyTime deadline) {
  if (!granted || !bell.held() || !bell.usable()) {
    let_go(std::move(bell), deadline);
    return;
  }
  Doorbell old;
  {
    std::lock_guard<std::mutex> lk(kept_mu_);
    Kept& k = kept_[key_of(name, token)];
    old = std::move(k.bell);
    k.bell = std::move(bell);
    k.until = my::Clock::now() + ttl + milliseconds{50};
  }
  let_go(std::move(old), deadline);
}

Doorbell MysqlStore::held_doorbell(const std::string& name,
                                   const std::string& token) {
  std::lock_guard<std::mutex> lk(kept_mu_);
  auto it = kept_.find(key_of(name, token));
  if (it == kept_.end()) return Doorbell();
  Doorbell bell = std::move(it->second.bell);
  kept_.erase(it);
  return bell;
}

void MysqlStore::touch_doorbell(const std::string& name,
                                const std::string& token, milliseconds ttl) {
  std::lock_guard<std::mutex> lk(kept_mu_);
  auto it = kept_.find(key_of(name, token));
  if (it != kept_.end()) {
    it->second.until = my::Clock::now() + ttl + milliseconds{50};
  }
}

void MysqlStore::sweep_doorbells(SteadyTime deadline) {
  std::vector<Doorbell> due;
  {
    std::lock_guard<std::mutex> lk(kept_mu_);
    const SteadyTime now = my::Clock::now();
    for (auto it = kept_.begin(); it != kept_.end();) {
      if (it->second.until <= now) {
        due.push_back(std::move(it->second.bell));
        it = kept_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& b : due) let_go(std::move(b), deadline);
}

void MysqlStore::let_go(Doorbell bell, SteadyTime deadline) {
  if (!bell.usable()) return;
  if (bell.tried) {
    auto r = bell.conn->query("DO RELEASE_ALL_LOCKS()", deadline);
    if (!r.ok()) return;  // broken: closed, and the server lets go
  }
  pool_.put(std::move(bell.conn));
}

int MysqlStore::ring_wait(my::Conn& conn, const std::string& target,
                          SteadyTime until, SteadyTime deadline) {
  until = std::min(until, deadline);
  const long long us = std::max<long long>(
      0, std::chrono::duration_cast<std::chrono::microseconds>(until -
                                                               my::Clock::now())
             .count());
  char secs[40];
  std::snprintf(secs, sizeof secs, "%lld.%06lld", us / 1000000, us % 1000000);
  // The server's timeout ends the wait; the client's deadline, a little
  // later, only bounds a server that does not answer (rule 7).
  auto r = conn.query("SELECT GET_LOCK('" + target + "', " + secs +
                          ");DO RELEASE_LOCK('" + target + "')",
                      std::min(deadline, until + milliseconds{500}));
  if (!r.ok()) return -1;
  return (*r)[0].at(0, 0) == "1" ? 1 : 0;
}

}  // namespace baton::store::my_impl
