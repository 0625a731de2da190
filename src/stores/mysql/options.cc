// stores/mysql/options.cc — mysql://'s descriptor: its URL, its options
// (checked by the shared parser, baton/store_descriptor.h) and the open
// function that reads them.
#include <cctype>
#include <string>
#include <vector>

#include "stores/mysql/store_impl.h"

namespace baton::store {
namespace {

Error bad(const StoreUrl& url, const std::string& why) {
  return Error(Errc::invalid_argument,
               "store URL \"" + url.safe + "\": " + why);
}

OptionSpec with_aliases(OptionSpec o, std::vector<std::string> aliases) {
  o.aliases = std::move(aliases);
  return o;
}

// ssl_mode ignoring case and with '-' for '_' ("VERIFY_CA", "verify-ca"):
// MySQL's clients write it upper case, libpq's sslmode writes dashes.
Result<my::TlsParams> read_tls(const StoreUrl& url) {
  const OptionValues& v = url.options;
  std::string mode = v.text("ssl_mode");
  for (char& ch : mode) {
    ch = ch == '-'
             ? '_'
             : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  my::TlsParams t;
  if (mode == "disabled") {
    t.mode = my::SslMode::disabled;
  } else if (mode == "preferred") {
    t.mode = my::SslMode::preferred;
  } else if (mode == "required") {
    t.mode = my::SslMode::required;
  } else if (mode == "verify_ca") {
    t.mode = my::SslMode::verify_ca;
  } else if (mode == "verify_identity") {
    t.mode = my::SslMode::verify_identity;
  } else {
    return bad(url, "ssl_mode: \"" + v.text("ssl_mode") +
                        "\" must be one of disabled, preferred, required, "
                        "verify_ca, verify_identity");
  }
  const std::string name = my::ssl_mode_name(t.mode);
  const bool verify = t.mode == my::SslMode::verify_ca ||
                      t.mode == my::SslMode::verify_identity;
  if (t.mode == my::SslMode::verify_ca && !v.given("ca")) {
    // Connector/C checks a chain without the name only against a CA it was
    // given, and a chain to any public CA, for any name, proves little.
    return bad(url,
               "ssl_mode=verify_ca needs ca=<file of the CA certificates the "
               "server's certificate must chain to>");
  }
  if (!verify && v.given("ca")) {
    // Connector/C would verify the chain anyway: say which mode that is.
    return bad(url,
               "ca is read by ssl_mode=verify_ca or verify_identity "
               "only (ssl_mode is " +
                   name + ")");
  }
  if (v.given("cert") != v.given("key")) {
    return bad(url,
               "cert and key go together (the client certificate and "
               "its key)");
  }
  if (t.mode == my::SslMode::disabled && v.given("cert")) {
    return bad(url, "cert and key are TLS options but ssl_mode is disabled");
  }
  if (verify) t.ca = v.text("ca");
  t.cert = v.text("cert");
  t.key = v.text("key");
  return t;
}

// The store's settings from the URL; invalid_argument naming the setting.
Result<my::StoreOptions> read_options(const StoreUrl& url,
                                      my::ConnParams* params) {
  if (url.hosts.size() != 1) return bad(url, "mysql:// takes exactly one host");
  params->host = url.hosts[0].host;
  params->port = url.hosts[0].port;
  if (!url.user.empty()) params->user = url.user;
  auto password = store_password(url, "MYSQL_PWD");
  if (!password.ok()) return std::move(password).error();
  params->password = std::move(*password);
  auto tls = read_tls(url);
  if (!tls.ok()) return std::move(tls).error();
  params->tls = std::move(*tls);
  if (!url.path.empty()) params->db = url.path;
  if (!sqlstep::valid_identifier(params->db, 64)) {
    return bad(url, "database \"" + params->db +
                        "\" must match [a-z0-9_]+ (at most 64 bytes)");
  }
  const OptionValues& v = url.options;
  my::StoreOptions o;
  o.prefix = v.text("prefix");
  if (!sqlstep::valid_identifier(o.prefix, 32)) {
    return bad(url, "prefix \"" + o.prefix +
                        "\" must match [a-z0-9_]+ (at most 32 bytes)");
  }
  const std::string& serialize = v.text("serialize");
  o.serialize = serialize == "center" ? my::Serialize::center
                : serialize == "name" ? my::Serialize::name
                                      : my::Serialize::segments;
  for (const char* key :
       {"segments", "max_idle_connections", "max_doorbells"}) {
    if (v.count(key) > sqlstep::kMaxCount) {
      return bad(url, std::string(key) + " must be at most " +
                          std::to_string(sqlstep::kMaxCount));
    }
  }
  o.segments = static_cast<int>(v.count("segments"));
  o.max_idle = static_cast<int>(v.count("max_idle_connections"));
  o.max_doorbells = static_cast<int>(v.count("max_doorbells"));
  o.connect_timeout = v.duration("connect_timeout");
  o.request_timeout = v.duration("request_timeout");
  o.waiter_timeout = v.duration("waiter_timeout");
  o.recheck = v.duration("recheck_interval");
  o.doorbell = v.flag("doorbell");
  o.fast_path = v.flag("fast_path");
  o.allow_non_durable = v.flag("allow_non_durable");
  params->unix_socket = v.text("socket");
  return o;
}

Result<std::unique_ptr<baton::Store>> open_mysql(const StoreUrl& url) {
  my::ConnParams params;
  auto o = read_options(url, &params);
  if (!o.ok()) return std::move(o).error();
  const std::string where =
      params.host + ":" + std::to_string(params.port) + "/" + params.db;
  auto store = std::make_unique<my_impl::MysqlStore>(
      std::move(*o), std::move(params), where, url.safe);
  if (Status st = store->open(); !st.ok()) return st.error();
  return std::unique_ptr<baton::Store>(std::move(store));
}

}  // namespace

const StoreDescriptor& mysql_descriptor() {
  static const StoreDescriptor d = [] {
    StoreDescriptor m;
    m.name = "mysql";
    m.schemes = {"mysql", "mariadb"};
    m.summary = "MariaDB / MySQL (InnoDB tables, durable commits)";
    m.url_form = "mysql://user[:password]@host[:port]/database";
    m.default_port = 3306;
    m.options = sqlstep::step_options(
        "50ms",
        "longest a waiter sleeps when nothing wakes it (it looks again "
        "sooner, by its place in line)");
    for (OptionSpec& p : password_options("MYSQL_PWD")) {
      m.options.push_back(std::move(p));
    }
    m.options.insert(
        m.options.end(),
        {
            choice_option("serialize", "segments",
                          {"center", "segments", "name"},
                          "what a transaction locks first: one row for every "
                          "name, one of `segments` rows by the name's hash, "
                          "or one row per name"),
            count_option("segments", "100", 1,
                         "serialization rows with serialize=segments (at "
                         "most 100000)"),
            connect_timeout_option("5s"),
            flag_option("doorbell", "on",
                        "waiters wake on the GET_LOCK doorbell of the entry "
                        "ahead of them"),
            count_option("max_doorbells", "64", 0,
                         "doorbell connections per store (at most 100000)"),
            flag_option("fast_path", "on",
                        "one-statement acquire, extend and release of an "
                        "idle plain lock (not with serialize=center)"),
            text_option("ssl_mode", "preferred",
                        "disabled, preferred (TLS if the server offers it, "
                        "unchecked: the MariaDB and MySQL clients' default), "
                        "required, verify_ca, verify_identity (any case, - "
                        "or _)"),
            with_aliases(file_option("ca",
                                     "CA certificates (PEM) the server's "
                                     "certificate must chain to "
                                     "(ssl_mode=verify_ca, which needs it, "
                                     "or verify_identity: default the "
                                     "system CAs)"),
                         {"ssl_ca"}),
            with_aliases(
                file_option("cert", "client certificate (PEM), with key"),
                {"ssl_cert"}),
            with_aliases(file_option("key",
                                     "the client certificate's key (PEM, "
                                     "unencrypted, mode 0600)"),
                         {"ssl_key"}),
            text_option("socket", "", "Unix socket path instead of TCP"),
            flag_option("allow_non_durable", "false",
                        "accept a server that may lose acknowledged commits "
                        "(throwaway tests only)"),
        });
    m.open = open_mysql;
    return m;
  }();
  return d;
}

}  // namespace baton::store
