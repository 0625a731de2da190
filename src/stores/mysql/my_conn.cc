// stores/mysql/my_conn.cc — deadline-bounded Connector/C round trips.
#include "stores/mysql/my_conn.h"

#include <errmsg.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>

namespace baton::store::my {
namespace {

int poll_events(int status) {
  int ev = 0;
  if (status & MYSQL_WAIT_READ) ev |= POLLIN;
  if (status & MYSQL_WAIT_WRITE) ev |= POLLOUT;
  if (status & MYSQL_WAIT_EXCEPT) ev |= POLLPRI;
  return ev;
}

bool tls_required(SslMode m) {
  return m != SslMode::disabled && m != SslMode::preferred;
}

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

const char* ssl_mode_name(SslMode m) {
  switch (m) {
    case SslMode::disabled:
      return "disabled";
    case SslMode::preferred:
      return "preferred";
    case SslMode::required:
      return "required";
    case SslMode::verify_ca:
      return "verify_ca";
    case SslMode::verify_identity:
      return "verify_identity";
  }
  return "?";
}

const std::string& ResultSet::at(std::size_t r, std::size_t c) const {
  static const std::string empty;
  if (r >= rows.size() || c >= rows[r].size() || !rows[r][c]) return empty;
  return *rows[r][c];
}

std::int64_t ResultSet::num(std::size_t r, std::size_t c) const {
  const std::string& s = at(r, c);
  return s.empty() ? 0 : std::strtoll(s.c_str(), nullptr, 10);
}

Conn::~Conn() { close(); }

void Conn::abort() {
  const int fd = fd_.load();
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

void Conn::close() {
  fd_.store(-1);
  if (mysql_ == nullptr) return;
  if (broken_) {
    // Whatever is in flight is abandoned: no COM_QUIT exchange that could
    // block on a server that does not answer.
    const my_socket fd = mysql_get_socket(mysql_);
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  }
  mysql_close(mysql_);
  mysql_ = nullptr;
}

int Conn::wait(int status, TimePoint deadline) {
  for (;;) {
    const TimePoint now = Clock::now();
    if (now >= deadline) return -1;
    long long ms = std::chrono::ceil<milliseconds>(deadline - now).count();
    bool lib_timeout = false;
    if (status & MYSQL_WAIT_TIMEOUT) {
      const long long lib = mysql_get_timeout_value_ms(mysql_);
      if (lib < ms) {
        ms = lib;
        lib_timeout = true;
      }
    }
    pollfd p{};
    p.fd = mysql_get_socket(mysql_);
    p.events = static_cast<short>(poll_events(status));
    const int r =
        ::poll(&p, 1, static_cast<int>(std::min<long long>(ms, 1 << 30)));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) {
      if (lib_timeout) return MYSQL_WAIT_TIMEOUT;
      continue;  // re-checks the deadline
    }
    int ready = 0;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) ready |= MYSQL_WAIT_READ;
    if (p.revents & (POLLOUT | POLLERR)) ready |= MYSQL_WAIT_WRITE;
    if (p.revents & POLLPRI) ready |= MYSQL_WAIT_EXCEPT;
    return ready == 0 ? status & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE) : ready;
  }
}

Error Conn::transport_error(const char* what, TimePoint deadline) {
  broken_ = true;
  if (Clock::now() >= deadline) {
    return Error(Errc::timeout, std::string("mysql://") + where_ + ": " + what +
                                    " did not finish before the deadline");
  }
  const unsigned code = mysql_ ? mysql_errno(mysql_) : 0;
  std::string msg = mysql_ ? mysql_error(mysql_) : "no connection";
  if (code == 1045 || code == 1044) {
    return Error(Errc::permission_denied, "mysql://" + where_ + ": " + msg);
  }
  return Error(Errc::unavailable,
               "mysql://" + where_ + ": " + what + " failed: " + msg);
}

void Conn::set_tls_options(const TlsParams& t) {
  // disabled: Connector/C 3.3 uses no TLS unless an SSL option is set; the
  // explicit 0 says so for readers.
  const my_bool on = t.mode == SslMode::disabled ? 0 : 1;
  mysql_optionsv(mysql_, MYSQL_OPT_SSL_ENFORCE, &on);
  if (t.mode == SslMode::disabled) return;
  if (!t.cert.empty()) {
    mysql_optionsv(mysql_, MYSQL_OPT_SSL_CERT, t.cert.c_str());
    mysql_optionsv(mysql_, MYSQL_OPT_SSL_KEY, t.key.c_str());
  }
  // A CA makes Connector/C 3.3 verify the chain (SSL_get_verify_result),
  // and only the chain; VERIFY_SERVER_CERT adds the host name (against
  // `ca`, or the system CAs when none is given) and is also what makes it
  // refuse, before login, a server without TLS.
  if (!t.ca.empty()) mysql_optionsv(mysql_, MYSQL_OPT_SSL_CA, t.ca.c_str());
  const my_bool verify = t.mode == SslMode::verify_identity ? 1 : 0;
  mysql_optionsv(mysql_, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
}

Error Conn::connect_error(const ConnParams& p, TimePoint deadline) {
  const unsigned code = mysql_errno(mysql_);
  const std::string msg = mysql_error(mysql_);
  Error e = transport_error("connect", deadline);
  if (e.code() == Errc::timeout) return e;
  if (code == 1049) {
    return Error(Errc::invalid_argument,
                 "mysql://" + where_ + ": database \"" + p.db +
                     "\" does not exist (create it, or grant the store's "
                     "user CREATE on it)");
  }
  const std::string mode = std::string("ssl_mode=") + ssl_mode_name(p.tls.mode);
  const std::string client_cert_refused =
      "the server ended the connection during the TLS login (" + mode +
      "; does it accept cert=" + p.tls.cert + "?)";
  std::string why;
  if (code == 1045) {
    // MariaDB answers the same for a wrong password and for an account
    // whose REQUIRE SSL / X509 the connection does not meet.
    why =
        "wrong user or password, or the account requires TLS or a client "
        "certificate (" +
        mode + (p.tls.cert.empty() ? ", no cert" : ", cert given") + ")";
  } else if (code == CR_SERVER_LOST && !p.tls.cert.empty()) {
    // A server that refuses the client certificate sends a TLS alert; with
    // TLS 1.3 it comes after the client's side of the handshake is done,
    // so Connector/C may see it only as the connection lost at login.
    why = client_cert_refused;
  } else if (code == CR_SSL_CONNECTION_ERROR) {
    // Connector/C's texts: its own for a missing TLS and a name mismatch;
    // else OpenSSL's, where a TLS alert is the server's refusal (of the
    // client certificate, e.g. "sslv3 alert certificate expired"), other
    // "certificate" texts are X509_verify_cert_error_string's about the
    // server's certificate, and the rest are local ("key values mismatch").
    const bool verify = p.tls.mode == SslMode::verify_ca ||
                        p.tls.mode == SslMode::verify_identity;
    if (contains(msg, "does not support it")) {
      why = "the server offers no TLS and " + mode + " requires it";
    } else if (contains(msg, "Validation of SSL server certificate")) {
      why = "the server's certificate is not for host \"" + p.host + "\" (" +
            mode + " checks the name)";
    } else if (contains(msg, "alert") && !p.tls.cert.empty()) {
      why = client_cert_refused;
    } else if (verify && contains(msg, "certificate")) {
      why = "the server's certificate did not verify against " +
            (p.tls.ca.empty() ? "the system CAs" : "ca=" + p.tls.ca) + " (" +
            mode + ")";
    } else {
      why =
          "TLS failed (" + mode +
          (p.tls.cert.empty() ? ""
                              : ", cert=" + p.tls.cert + ", key=" + p.tls.key) +
          ")";
    }
  }
  if (why.empty()) return e;
  return Error(e.code(), e.message() + ": " + why);
}

Status Conn::connect(const ConnParams& p, const std::string& where,
                     TimePoint deadline) {
  close();
  where_ = where;
  broken_ = false;
  mysql_ = mysql_init(nullptr);
  if (mysql_ == nullptr) return Error(Errc::internal, "mysql_init failed");
  mysql_options(mysql_, MYSQL_OPT_NONBLOCK, nullptr);
  // Back-stops only (whole seconds); the deadline below is the real bound.
  const long long left =
      std::chrono::ceil<std::chrono::seconds>(deadline - Clock::now()).count();
  const unsigned secs =
      static_cast<unsigned>(std::clamp<long long>(left, 1, 3600));
  mysql_options(mysql_, MYSQL_OPT_CONNECT_TIMEOUT, &secs);
  const my_bool no = 0;
  mysql_options(mysql_, MYSQL_OPT_RECONNECT, &no);
  mysql_options(mysql_, MYSQL_SET_CHARSET_NAME, "binary");
  set_tls_options(p.tls);
  MYSQL* ret = nullptr;
  int status = mysql_real_connect_start(
      &ret, mysql_, p.host.c_str(), p.user.c_str(), p.password.c_str(),
      p.db.empty() ? nullptr : p.db.c_str(), p.port,
      p.unix_socket.empty() ? nullptr : p.unix_socket.c_str(),
      CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS);
  while (status != 0) {
    const int ready = wait(status, deadline);
    if (ready < 0) return transport_error("connect", deadline);
    status = mysql_real_connect_cont(&ret, mysql_, ready);
  }
  if (ret == nullptr) return connect_error(p, deadline);
  // Connector/C 3.3 falls back to plain TCP, silently, when the server does
  // not offer TLS (unless it verifies the name): the login has happened, but
  // no statement goes out on a connection ssl_mode says must be TLS.
  if (tls_required(p.tls.mode) && mysql_get_ssl_cipher(mysql_) == nullptr) {
    broken_ = true;
    return Error(Errc::unavailable,
                 "mysql://" + where_ +
                     ": connect failed: the server offers no TLS and "
                     "ssl_mode=" +
                     ssl_mode_name(p.tls.mode) + " requires it");
  }
  fd_.store(static_cast<int>(mysql_get_socket(mysql_)));
  DbError db;
  auto r = query(
      "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;"
      "SET SESSION time_zone = '+00:00', SESSION autocommit = 1,"
      " SESSION innodb_lock_wait_timeout = 5",
      deadline, &db);
  if (!r.ok()) return std::move(r).error();
  return {};
}

Result<std::vector<ResultSet>> Conn::query(std::string_view sql,
                                           TimePoint deadline,
                                           DbError* db_error) {
  if (broken()) return Error(Errc::unavailable, "mysql connection is closed");
  // Nothing is sent once the caller's deadline has passed: the server
  // would run the statement for nobody (rule 7). The connection breaks as
  // on any timeout: it may be inside a transaction that must not survive.
  if (Clock::now() >= deadline) {
    broken_ = true;
    return Error(Errc::timeout, "mysql://" + where_ +
                                    ": the call's deadline passed before the "
                                    "query was sent");
  }
  int err = 0;
  int status = mysql_real_query_start(&err, mysql_, sql.data(),
                                      static_cast<unsigned long>(sql.size()));
  while (status != 0) {
    const int ready = wait(status, deadline);
    if (ready < 0) return transport_error("query", deadline);
    status = mysql_real_query_cont(&err, mysql_, ready);
  }
  std::vector<ResultSet> out;
  auto server_error = [&]() -> Error {
    const unsigned code = mysql_errno(mysql_);
    if (code >= CR_MIN_ERROR && code <= CR_MAX_ERROR) {
      return transport_error("query", deadline);
    }
    if (db_error != nullptr) {
      db_error->code = code;
      db_error->message = mysql_error(mysql_);
    }
    return Error(Errc::internal, "mysql://" + where_ + ": error " +
                                     std::to_string(code) + ": " +
                                     mysql_error(mysql_));
  };
  if (err != 0) return server_error();
  for (;;) {
    MYSQL_RES* res = nullptr;
    status = mysql_store_result_start(&res, mysql_);
    while (status != 0) {
      const int ready = wait(status, deadline);
      if (ready < 0) return transport_error("reading a result", deadline);
      status = mysql_store_result_cont(&res, mysql_, ready);
    }
    ResultSet rs;
    if (res != nullptr) {
      const unsigned nf = mysql_num_fields(res);
      while (MYSQL_ROW row = mysql_fetch_row(res)) {
        unsigned long* len = mysql_fetch_lengths(res);
        std::vector<std::optional<std::string>> r(nf);
        for (unsigned i = 0; i < nf; ++i) {
          if (row[i] != nullptr) r[i].emplace(row[i], len[i]);
        }
        rs.rows.push_back(std::move(r));
      }
      mysql_free_result(res);
    } else if (mysql_field_count(mysql_) != 0) {
      return server_error();
    } else {
      rs.affected = mysql_affected_rows(mysql_);
    }
    out.push_back(std::move(rs));
    int more = 0;
    status = mysql_next_result_start(&more, mysql_);
    while (status != 0) {
      const int ready = wait(status, deadline);
      if (ready < 0) return transport_error("reading a result", deadline);
      status = mysql_next_result_cont(&more, mysql_, ready);
    }
    if (more < 0) break;
    if (more > 0) return server_error();
  }
  return out;
}

Pool::~Pool() = default;

Result<std::unique_ptr<Conn>> Pool::get(TimePoint deadline) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    while (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      if (!c->broken()) return c;
    }
  }
  auto c = std::make_unique<Conn>();
  if (Status st = c->connect(params_, where_, deadline); !st.ok()) {
    return st.error();
  }
  return c;
}

void Pool::put(std::unique_ptr<Conn> c) {
  if (!c || c->broken()) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (static_cast<int>(idle_.size()) < max_idle_) idle_.push_back(std::move(c));
}

std::uint32_t crc32(std::string_view bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : bytes) {
    crc ^= c;
    for (int k = 0; k < 8; ++k)
      crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

}  // namespace baton::store::my
