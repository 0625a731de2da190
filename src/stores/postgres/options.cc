// stores/postgres/options.cc — postgres:// URL settings.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iterator>
#include <string_view>

#include "core/duration.h"
#include "stores/postgres/postgres_store.h"
#include "stores/postgres/schema.h"

namespace baton::store::pg {
namespace {

// "MaxOpenConnections", "max_open_connections" and "maxopenconnections"
// are the same setting.
std::string canonical(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '_' || c == '-') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

Error bad(const core::Url& url, const std::string& why) {
  return Error(Errc::invalid_argument,
               "store URL \"" + url.safe() + "\": " + why);
}

}  // namespace

Result<StoreOptions> parse_options(const core::Url& url, ConnParams* params,
                                   std::string* where) {
  StoreOptions o;
  if (url.hosts.empty()) return bad(url, "postgres:// needs a host");
  std::string hosts, ports;
  for (const auto& hp : url.hosts) {
    if (!hosts.empty()) {
      hosts += ',';
      ports += ',';
    }
    hosts += hp.host;
    ports += std::to_string(hp.port == 0 ? 5432 : hp.port);
  }
  params->clear();
  params->emplace_back("host", hosts);
  params->emplace_back("port", ports);
  if (!url.user.empty()) params->emplace_back("user", url.user);
  if (!url.password.empty()) params->emplace_back("password", url.password);
  if (!url.path.empty()) params->emplace_back("dbname", url.path);
  if (url.hosts.size() > 1) {
    params->emplace_back("target_session_attrs", "read-write");
  }
  std::string app = "baton";
  for (const auto& [key, value] : url.query) {
    const std::string k = canonical(key);
    auto duration = [&](milliseconds* out) -> Status {
      auto d = core::parse_duration(value);
      if (!d.ok()) return bad(url, key + ": " + d.error().message());
      *out = *d;
      return {};
    };
    auto count = [&](int* out) -> Status {
      int v = 0;
      auto [p, ec] =
          std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || p != value.data() + value.size() || v < 0) {
        return bad(url, key + " \"" + value + "\" is not a count");
      }
      *out = v;
      return {};
    };
    Status st;
    if (k == "schema") {
      if (!valid_schema_name(value)) {
        return bad(url,
                   "schema \"" + value +
                       "\" must match [a-z_][a-z0-9_]* (at most 40 bytes)");
      }
      o.schema = value;
    } else if (k == "maxopenconnections") {
      st = count(&o.pool.max_open);
      if (st.ok() && o.pool.max_open < 1) {
        return bad(url, "MaxOpenConnections must be at least 1");
      }
    } else if (k == "maxidleconnections") {
      st = count(&o.pool.max_idle);
    } else if (k == "connectionmaxlifetime") {
      st = duration(&o.pool.max_lifetime);
    } else if (k == "connectionmaxidletime") {
      st = duration(&o.pool.max_idle_time);
    } else if (k == "connecttimeout") {
      st = duration(&o.pool.connect_timeout);
    } else if (k == "requesttimeout") {
      st = duration(&o.request_timeout);
    } else if (k == "waitertimeout") {
      st = duration(&o.waiter_timeout);
    } else if (k == "recheckinterval") {
      st = duration(&o.recheck_interval);
    } else if (k == "serialize") {
      if (value != "name" && value != "global") {
        return bad(url, "serialize must be \"name\" or \"global\"");
      }
      o.global_serialize = value == "global";
    } else if (k == "sslmode") {
      static constexpr std::string_view kModes[] = {
          "disable", "allow", "prefer", "require", "verify-ca", "verify-full"};
      if (std::find(std::begin(kModes), std::end(kModes), value) ==
          std::end(kModes)) {
        return bad(url, "sslmode \"" + value +
                            "\" must be disable, allow, prefer, require, "
                            "verify-ca or verify-full");
      }
      params->emplace_back("sslmode", value);
    } else if (k == "passfile" || k == "sslrootcert" || k == "sslcert" ||
               k == "sslkey" || k == "sslcrl") {
      // Files libpq reads: a path that cannot be read is a setting error
      // now, not a connection failure on every later call.
      if (value.empty() || ::access(value.c_str(), R_OK) != 0) {
        return bad(url, key + "=" + value + ": cannot read it: " +
                            (value.empty() ? std::string("empty path")
                                           : std::strerror(errno)));
      }
      params->emplace_back(k, value);
    } else if (k == "sslpassword") {
      // A secret in the URL would be echoed wherever the URL is (only
      // password= is masked): keys must be unencrypted, mode 0600.
      return bad(url,
                 "sslpassword is not accepted (it would put a secret in "
                 "the URL): use an unencrypted sslkey file readable only by "
                 "its owner (mode 0600)");
    } else if (k == "password") {
      params->emplace_back("password", value);
    } else if (k == "applicationname") {
      app = value;
    } else {
      return bad(url, "unknown setting \"" + key + "\"");
    }
    if (!st.ok()) return st.error();
  }
  o.pool.max_idle = std::min(o.pool.max_idle, o.pool.max_open);
  if (o.request_timeout.count() <= 0 || o.waiter_timeout.count() <= 0 ||
      o.recheck_interval.count() <= 0 || o.pool.connect_timeout.count() <= 0) {
    return bad(url, "timeouts and intervals must be positive");
  }
  params->emplace_back("application_name", app);
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
