// stores/postgres/options.cc — the postgres:// descriptor's options and
// what they become: the store's settings and libpq's connection keywords.
#include <string>
#include <vector>

#include "stores/postgres/postgres_store.h"
#include "stores/postgres/schema.h"

namespace baton::store::pg {
namespace {

OptionSpec with_aliases(OptionSpec o, std::vector<std::string> aliases) {
  o.aliases = std::move(aliases);
  return o;
}

// A duration where 0 means "no limit".
OptionSpec limit_option(std::string key, std::string default_value,
                        std::string help) {
  OptionSpec o =
      duration_option(std::move(key), std::move(default_value), help);
  o.zero_ok = true;
  return o;
}

Error bad(const StoreUrl& url, const std::string& why) {
  return Error(Errc::invalid_argument,
               "store URL \"" + url.safe + "\": " + why);
}

}  // namespace

std::vector<OptionSpec> options() {
  std::vector<OptionSpec> out = {
      text_option("schema", "baton",
                  "PostgreSQL schema of the store's tables and functions "
                  "([a-z_][a-z0-9_]*, at most 40 bytes)"),
      count_option("max_open_connections", "16", 1,
                   "most pooled connections open at once (the LISTEN "
                   "connection comes on top)"),
      count_option("max_idle_connections", "16", 0,
                   "most idle connections kept (at most "
                   "max_open_connections)"),
      limit_option("connection_max_lifetime", "30m",
                   "a connection this old is closed instead of reused (0 = "
                   "no limit)"),
      limit_option("connection_max_idle_time", "5m",
                   "a connection idle this long is closed instead of reused "
                   "(0 = no limit)"),
      connect_timeout_option(),
      request_timeout_option(),
      duration_option("waiter_timeout", "5s",
                      "a waiting request not looked at for this long is "
                      "dropped from the queue (its heartbeat)"),
      recheck_interval_option(),
      choice_option("serialize", "name", {"name", "global"},
                    "name: one advisory lock per lock name; global: one "
                    "for all names"),
      choice_option(
          "sslmode", "",
          {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"},
          "libpq's sslmode (default: libpq's, prefer)"),
      with_aliases(file_option("ca",
                               "CA certificates for sslmode=verify-ca "
                               "or verify-full (libpq's sslrootcert)"),
                   {"sslrootcert"}),
      with_aliases(file_option("cert", "client certificate (libpq's sslcert)"),
                   {"sslcert"}),
      with_aliases(file_option("key",
                               "the client certificate's key, "
                               "unencrypted, mode 0600 (libpq's "
                               "sslkey)"),
                   {"sslkey"}),
      file_option("sslcrl", "certificate revocation list (libpq's)"),
      file_option("passfile", "libpq's password file"),
      secret_option("sslpassword",
                    "refused: it would put a secret in the URL; use an "
                    "unencrypted key file (mode 0600)"),
      text_option("application_name", "baton", "passed to libpq"),
  };
  // password_file: the shared key (the first line of a file of mode 0600);
  // passfile: libpq's own format (host:port:db:user:password lines).
  for (OptionSpec& p : password_options("PGPASSWORD")) {
    out.push_back(std::move(p));
  }
  return out;
}

Result<StoreOptions> settings(const StoreUrl& url, ConnParams* params,
                              std::string* where) {
  const OptionValues& v = url.options;
  if (v.given("sslpassword")) {
    return bad(url,
               "sslpassword is not accepted (it would put a secret in the "
               "URL): use an unencrypted key file readable only by its owner "
               "(mode 0600)");
  }
  StoreOptions o;
  o.schema = v.text("schema");
  if (!valid_schema_name(o.schema)) {
    return bad(url, "schema \"" + o.schema +
                        "\" must match [a-z_][a-z0-9_]* (at most 40 bytes)");
  }
  o.pool.max_open = static_cast<int>(v.count("max_open_connections"));
  o.pool.max_idle = static_cast<int>(
      std::min<std::int64_t>(v.count("max_idle_connections"), o.pool.max_open));
  o.pool.max_lifetime = v.duration("connection_max_lifetime");
  o.pool.max_idle_time = v.duration("connection_max_idle_time");
  o.pool.connect_timeout = v.duration("connect_timeout");
  o.request_timeout = v.duration("request_timeout");
  o.waiter_timeout = v.duration("waiter_timeout");
  o.recheck_interval = v.duration("recheck_interval");
  o.global_serialize = v.text("serialize") == "global";

  std::string hosts, ports;
  for (const auto& hp : url.hosts) {
    hosts += (hosts.empty() ? "" : ",") + hp.host;
    ports += (ports.empty() ? "" : ",") +
             std::to_string(hp.port == 0 ? 5432 : hp.port);
  }
  params->clear();
  params->emplace_back("host", hosts);
  params->emplace_back("port", ports);
  if (!url.user.empty()) params->emplace_back("user", url.user);
  // Without one here, libpq looks in PGPASSWORD and the passfile itself.
  auto password = store_password(url, "");
  if (!password.ok()) return std::move(password).error();
  if (!password->empty()) params->emplace_back("password", *password);
  if (!url.path.empty()) params->emplace_back("dbname", url.path);
  // Several hosts: libpq tries them in order and takes the primary.
  if (url.hosts.size() > 1) {
    params->emplace_back("target_session_attrs", "read-write");
  }
  const std::pair<const char*, const char*> passed[] = {
      {"sslmode", "sslmode"}, {"ca", "sslrootcert"}, {"cert", "sslcert"},
      {"key", "sslkey"},      {"sslcrl", "sslcrl"},  {"passfile", "passfile"}};
  for (const auto& [key, libpq] : passed) {
    if (v.given(key)) params->emplace_back(libpq, v.text(key));
  }
  params->emplace_back("application_name", v.text("application_name"));
  // The store's statements look rows up by key: generic plans are always
  // right for them, and re-planning every call (plan_cache_mode=auto often
  // picks custom plans for PL/pgSQL statements) costs more than the query.
  std::string session = "-c plan_cache_mode=force_generic_plan";
  if (o.global_serialize) session += " -c baton.serialize=global";
  params->emplace_back("options", session);
  *where = hosts + ":" + ports + (url.path.empty() ? "" : "/" + url.path);
  return o;
}

}  // namespace baton::store::pg
