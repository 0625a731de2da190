// stores/mysql/my_conn.h — one MariaDB Connector/C connection driven through
// the non-blocking API (mysql_*_start / _cont with poll()), so that every
// round trip is bounded by a steady-clock deadline to the millisecond
// (rule 7; Connector/C's own MYSQL_OPT_READ_TIMEOUT counts whole seconds),
// and a small pool of them.
//
// A connection whose round trip failed at the transport level or ran out of
// time is closed and never reused (a late reply must not be read as the
// answer to a later query).
//
// Thread safety: a Conn is used by one thread at a time (abort() aside);
// Pool is safe for concurrent use.
#ifndef BATON_STORES_MYSQL_MY_CONN_H_
#define BATON_STORES_MYSQL_MY_CONN_H_

#include <mysql.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "stores/sqlstep/sql_state.h"

namespace baton::store::my {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using std::chrono::milliseconds;

// ssl_mode (docs/stores/mysql.md, "Security"). With Connector/C 3.3:
// preferred asks for TLS when the server offers it and checks nothing;
// required also refuses a connection that came up without TLS (checked after
// the login: the library logs in in clear when the server offers no TLS);
// verify_ca loads `ca`, which makes the library check the certificate chain
// (not the name); verify_identity adds MYSQL_OPT_SSL_VERIFY_SERVER_CERT:
// chain (to `ca`, or the system CAs) and host name, and a server without TLS
// is refused before login.
enum class SslMode {
  disabled,
  preferred,
  required,
  verify_ca,
  verify_identity
};

// The canonical name ("verify_ca"); for messages.
const char* ssl_mode_name(SslMode m);

struct TlsParams {
  SslMode mode = SslMode::preferred;
  std::string ca;    // verify_ca (required) / verify_identity ("": system CAs)
  std::string cert;  // client certificate, with key (both or neither)
  std::string key;
};

struct ConnParams {
  std::string host = "127.0.0.1";
  unsigned port = 3306;
  std::string user = "root";
  std::string password;  // never logged
  std::string db = "baton";
  std::string unix_socket;
  TlsParams tls;  // every connection of a store: pool, doorbells, schema
};

// One result set: rows of nullable text values.
struct ResultSet {
  std::vector<std::vector<std::optional<std::string>>> rows;
  std::uint64_t affected = 0;
  const std::string& at(std::size_t r, std::size_t c) const;
  std::int64_t num(std::size_t r, std::size_t c) const;
};

// A server error from one statement (errno as the server reports it).
struct DbError {
  unsigned code = 0;
  std::string message;
};

class Conn {
 public:
  Conn() = default;
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Connects with p.tls and prepares the session (READ COMMITTED, UTC,
  // short lock waits). unavailable / timeout / permission_denied; every
  // message starts "mysql://host:port/db" and never holds the password. A
  // connection that ssl_mode says must be TLS and is not is closed before
  // any statement is sent (unavailable).
  Status connect(const ConnParams& p, const std::string& where,
                 TimePoint deadline);

  // Runs `sql` (one or more ';'-separated statements) and returns every
  // result set. A server error of a statement is returned in *db_error
  // (when given) with Errc::internal; transport failures and the deadline
  // are unavailable / timeout and break the connection (a deadline that
  // has passed already sends nothing).
  Result<std::vector<ResultSet>> query(std::string_view sql, TimePoint deadline,
                                       DbError* db_error = nullptr);

  bool broken() const { return mysql_ == nullptr || broken_; }
  // Ends a round trip in progress on another thread (it fails, and the
  // connection breaks): shuts the socket down. Safe to call from any
  // thread while the connection is open.
  void abort();

 private:
  // Waits for the socket as `status` asks, until `deadline`; returns the
  // ready bits, or -1 when the deadline passed.
  int wait(int status, TimePoint deadline);
  Error transport_error(const char* what, TimePoint deadline);
  // Sets the TLS options of p.tls on mysql_ (before the connect).
  void set_tls_options(const TlsParams& t);
  // The connect failure as the caller should read it: the library's text
  // and, for TLS and login failures, what the setting that caused it checks.
  Error connect_error(const ConnParams& p, TimePoint deadline);
  void close();

  MYSQL* mysql_ = nullptr;
  std::atomic<int> fd_{-1};  // the socket while connected, for abort()
  bool broken_ = false;
  std::string where_;
};

class Pool {
 public:
  Pool(ConnParams p, std::string where, int max_idle)
      : params_(std::move(p)), where_(std::move(where)), max_idle_(max_idle) {}
  ~Pool();

  // An idle connection or a new one (connect bounded by `deadline`).
  Result<std::unique_ptr<Conn>> get(TimePoint deadline);
  // Returns a healthy connection to the pool; a broken one is closed.
  void put(std::unique_ptr<Conn> c);
  const std::string& where() const { return where_; }

 private:
  const ConnParams params_;
  const std::string where_;
  const int max_idle_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_;  // guarded by mu_
};

// X'..' literal of arbitrary bytes (safe for any input, no escaping rules).
using sqlstep::hex_literal;
// IEEE CRC-32 (the same as MySQL's CRC32()).
std::uint32_t crc32(std::string_view bytes);

// Server errors worth retrying the whole transaction for.
inline bool retryable(unsigned code) {
  return code == 1213 /*ER_LOCK_DEADLOCK*/ ||
         code == 1205 /*ER_LOCK_WAIT_TIMEOUT*/ || code == 1020 /*ER_CHECKREAD*/;
}

}  // namespace baton::store::my

#endif  // BATON_STORES_MYSQL_MY_CONN_H_
