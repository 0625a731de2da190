// stores/zookeeper/zk_conn_session.cc — a Conn's session: opening it
// (with the answer to its credentials awaited), what it knows of its
// session and of ZooKeeper's clock, and its errors.
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <string>
#include <utility>

#include "stores/zookeeper/zk_conn.h"
#include "stores/zookeeper/zk_handle.h"

namespace baton::store::zk {
namespace {

using std::chrono::steady_clock;

// Quiet the C client's own logging (it prints to stderr by default).
struct QuietLog {
  QuietLog() { zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR); }
};

}  // namespace

Conn::Conn(Options options) : options_(std::move(options)) {
  if (options_.acl.empty()) {
    options_.acl = {AclEntry{"world", "anyone", kPermAll}};
  }
  acl_ = std::make_unique<CAcl>(options_.acl);
}

Result<std::unique_ptr<Conn>> Conn::open(const Options& options) {
  static QuietLog quiet;
  std::unique_ptr<Conn> c(new Conn(options));
  auto h = c->handle();
  if (h == nullptr) {
    return Error(Errc::unavailable,
                 "zookeeper " + options.where + ": cannot create a client");
  }
  std::unique_lock<std::mutex> lk(h->mu);
  const auto until = steady_clock::now() + options.request_timeout;
  // With credentials, the session is used only once ZooKeeper accepted
  // them (the C client sent them first thing on the connection).
  const bool auth = !options.digest.empty();
  const bool answered = h->cv.wait_until(lk, until, [&] {
    if (h->state == ZOO_AUTH_FAILED_STATE) return true;
    return h->state == ZOO_CONNECTED_STATE && (!auth || h->auth_done);
  });
  if (h->state == ZOO_AUTH_FAILED_STATE || (h->auth_done && h->auth_rc != 0)) {
    const int rc = h->auth_rc != 0 ? h->auth_rc : ZAUTHFAILED;
    const std::string user = options.digest.substr(0, options.digest.find(':'));
    return Error(Errc::permission_denied,
                 "zookeeper " + options.where +
                     ": ZooKeeper refused the digest credentials of user \"" +
                     user + "\": " + zerror(rc) +
                     " (the session is in state AUTH_FAILED; is digest "
                     "authentication disabled on the server, "
                     "zookeeper.DigestAuthenticationProvider.enabled=false?)");
  }
  if (!answered) {
    return Error(Errc::unavailable,
                 "zookeeper " + options.where + ": no session within " +
                     std::to_string(options.request_timeout.count()) +
                     "ms (is ZooKeeper running there?)" +
                     (auth && h->state == ZOO_CONNECTED_STATE
                          ? " (connected, but no answer to the credentials)"
                          : ""));
  }
  return c;
}

std::int64_t Conn::session_id() {
  auto h = handle();
  if (h == nullptr) return 0;
  const clientid_t* id = zoo_client_id(h->zh);
  return id == nullptr ? 0 : id->client_id;
}

std::int64_t Conn::session_timeout_ms() {
  auto h = handle();
  const int t = h == nullptr ? 0 : zoo_recv_timeout(h->zh);
  return t > 0 ? t : options_.session_timeout.count();
}

bool Conn::expired_session(std::int64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  return std::find(expired_.begin(), expired_.end(), id) != expired_.end();
}

void Conn::note_server_time(std::int64_t server_ms) {
  std::lock_guard<std::mutex> lk(mu_);
  server_ms_ = server_ms;
  server_seen_ = steady_clock::now();
}

std::int64_t Conn::server_time_lower_bound() {
  std::lock_guard<std::mutex> lk(mu_);
  if (server_ms_ == 0) return 0;
  return server_ms_ + std::chrono::duration_cast<milliseconds>(
                          steady_clock::now() - server_seen_)
                          .count();
}

Error Conn::error(int rc, std::string_view what) const {
  std::string msg = "zookeeper " + options_.where + ": " + std::string(what);
  if (rc == kGaveUp) {
    return Error(Errc::unavailable,
                 msg + ": no answer in time (outcome unknown)");
  }
  msg += ": ";
  msg += zerror(rc);
  switch (rc) {
    case ZCONNECTIONLOSS:
    case ZSESSIONEXPIRED:
    case ZINVALIDSTATE:
    case ZCLOSING:
    case ZOPERATIONTIMEOUT:
    case ZSESSIONMOVED:
      return Error(Errc::unavailable, msg);
    case ZNOAUTH:
    case ZAUTHFAILED:
      return Error(Errc::permission_denied, msg);
    default:
      return Error(Errc::internal, msg);
  }
}

}  // namespace baton::store::zk
