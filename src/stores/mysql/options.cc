// stores/mysql/options.cc — mysql:// URL settings.
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/duration.h"
#include "stores/mysql/mysql_store.h"

namespace baton::store::my {
namespace {

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

bool valid_identifier(std::string_view s, std::size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<StoreOptions> parse_options(const core::Url& url, ConnParams* params,
                                   std::string* where) {
  StoreOptions o;
  if (url.hosts.size() != 1) {
    return bad(url, url.hosts.empty() ? "mysql:// needs a host"
                                      : "mysql:// takes exactly one host");
  }
  params->host = url.hosts[0].host;
  params->port = url.hosts[0].port == 0 ? 3306 : url.hosts[0].port;
  if (!url.user.empty()) params->user = url.user;
  params->password = url.password;
  if (!url.path.empty()) params->db = url.path;
  if (!valid_identifier(params->db, 64)) {
    return bad(url, "database \"" + params->db +
                        "\" must match [a-z0-9_]+ (at most 64 bytes)");
  }
  std::string password_file;
  for (const auto& [key, value] : url.query) {
    const std::string k = canonical(key);
    auto duration = [&](milliseconds* out) -> Status {
      auto d = core::parse_duration(value);
      if (!d.ok()) return bad(url, key + ": " + d.error().message());
      if (d->count() <= 0) return bad(url, key + " must be positive");
      *out = *d;
      return {};
    };
    auto count = [&](int* out, int lo, int hi) -> Status {
      int v = 0;
      auto [p, ec] =
          std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || p != value.data() + value.size() || v < lo ||
          v > hi) {
        return bad(url, key + " \"" + value + "\" is not a count in " +
                            std::to_string(lo) + ".." + std::to_string(hi));
      }
      *out = v;
      return {};
    };
    Status st;
    if (k == "prefix") {
      if (!valid_identifier(value, 32)) {
        return bad(url, "prefix \"" + value +
                            "\" must match [a-z0-9_]+ (at most 32 bytes)");
      }
      o.prefix = value;
    } else if (k == "serialize") {
      if (value == "center") {
        o.serialize = Serialize::center;
      } else if (value == "segments") {
        o.serialize = Serialize::segments;
      } else if (value == "name") {
        o.serialize = Serialize::name;
      } else {
        return bad(url,
                   "serialize must be \"center\", \"segments\" or "
                   "\"name\", not \"" +
                       value + "\"");
      }
    } else if (k == "segments") {
      st = count(&o.segments, 1, 100000);
    } else if (k == "maxidle" || k == "maxidleconnections") {
      st = count(&o.max_idle, 0, 10000);
    } else if (k == "connecttimeout") {
      st = duration(&o.connect_timeout);
    } else if (k == "requesttimeout") {
      st = duration(&o.request_timeout);
    } else if (k == "waitertimeout") {
      st = duration(&o.waiter_timeout);
    } else if (k == "recheckmax") {
      st = duration(&o.recheck_max);
    } else if (k == "doorbell") {
      if (value != "on" && value != "off") {
        return bad(url, "doorbell must be on or off, not \"" + value + "\"");
      }
      o.doorbell = value == "on";
    } else if (k == "fastpath") {
      if (value != "on" && value != "off") {
        return bad(url, "fast_path must be on or off, not \"" + value + "\"");
      }
      o.fast_path = value == "on";
    } else if (k == "maxdoorbells") {
      st = count(&o.max_doorbells, 0, 10000);
    } else if (k == "passwordfile") {
      password_file = value;
    } else if (k == "socket") {
      params->unix_socket = value;
    } else if (k == "allownondurable") {
      if (value != "true" && value != "false") {
        return bad(url, "allow_non_durable must be true or false");
      }
      o.allow_non_durable = value == "true";
    } else {
      return bad(url, "unknown setting \"" + key + "\"");
    }
    if (!st.ok()) return st.error();
  }
  if (params->password.empty() && !password_file.empty()) {
    std::ifstream in(password_file);
    if (!in)
      return bad(url, "cannot read password_file \"" + password_file + "\"");
    std::string line;
    std::getline(in, line);
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) {
      line.pop_back();
    }
    params->password = line;
  }
  if (params->password.empty()) {
    if (const char* env = std::getenv("MYSQL_PWD")) params->password = env;
  }
  *where = params->host + ":" + std::to_string(params->port) + "/" + params->db;
  return o;
}

}  // namespace baton::store::my
