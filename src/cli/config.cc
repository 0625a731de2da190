// cli/config.cc — the `baton` CLI's YAML config file.
#include "cli/config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

#include "baton/duration.h"
#include "baton/validate.h"

namespace baton::cli {
namespace {

Error bad(const std::string& path, const std::string& why) {
  return Error(Errc::invalid_argument, "config " + path + ": " + why);
}

// The pool settings and whether each is a count (else a duration).
struct PoolKey {
  const char* name;
  bool count;
  int min;
};
constexpr PoolKey kPoolKeys[] = {
    {"MaxOpenConnections", true, 1},
    {"MaxIdleConnections", true, 0},
    {"ConnectionMaxLifetime", false, 0},
    {"ConnectionMaxIdleTime", false, 0},
};

std::string lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// "MaxOpenConnections", "max_open_connections" and "maxopenconnections"
// are one key (as in the store URL).
std::string canonical(const std::string& key) {
  std::string out;
  for (char c : lower(key)) {
    if (c != '_' && c != '-') out += c;
  }
  return out;
}

}  // namespace

Result<CliConfig> load_cli_config(const std::string& path) {
  // Read here, not with YAML::LoadFile, so that the OS says why a file
  // cannot be read ("No such file or directory", "Permission denied").
  std::string text;
  {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
      return bad(path, std::string("cannot read it: ") + std::strerror(errno));
    }
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    const int read_errno = std::ferror(f) ? errno : 0;
    std::fclose(f);
    if (read_errno != 0) {
      return bad(path,
                 std::string("cannot read it: ") + std::strerror(read_errno));
    }
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const std::exception& e) {
    return bad(path, std::string("not valid YAML: ") + e.what());
  }
  CliConfig c;
  c.path = path;
  if (root.IsNull()) return c;  // an empty file
  if (!root.IsMap()) return bad(path, "not a YAML map of settings");
  for (const auto& kv : root) {
    std::string key;
    std::string value;
    try {
      key = kv.first.as<std::string>();
      if (!kv.second.IsScalar()) return bad(path, key + " must be a value");
      value = kv.second.as<std::string>();
    } catch (const YAML::Exception& e) {
      return bad(path, std::string("unreadable entry: ") + e.what());
    }
    auto duration = [&]() -> Result<std::chrono::milliseconds> {
      auto d = parse_duration(value);
      if (!d.ok()) return bad(path, key + ": " + d.error().message());
      return *d;
    };
    const std::string k = canonical(key);
    if (k == "store") {
      if (value.empty()) return bad(path, "Store is empty");
      c.store = value;
    } else if (k == "label") {
      if (Status st = validate_label(value); !st.ok()) {
        return bad(path, "Label: " + st.error().message());
      }
      c.label = value;
    } else if (k == "ttl") {
      auto d = duration();
      if (!d.ok()) return std::move(d).error();
      if (Status st = validate_ttl(*d); !st.ok()) {
        return bad(path, "TTL: " + st.error().message());
      }
      c.ttl = *d;
    } else if (k == "retryinterval") {
      auto d = duration();
      if (!d.ok()) return std::move(d).error();
      c.retry_interval = *d;
    } else if (k == "timeout") {
      auto d = duration();
      if (!d.ok()) return std::move(d).error();
      if (*d <= std::chrono::milliseconds::zero()) {
        return bad(path, "Timeout must be more than 0");
      }
      c.timeout = *d;
    } else if (k == "metricsfile" || k == "events") {
      if (value.empty()) return bad(path, key + " is empty");
      (k == "events" ? c.events : c.metrics_file) = value;
    } else {
      const PoolKey* pk = nullptr;
      for (const PoolKey& pool_key : kPoolKeys) {
        if (k == canonical(pool_key.name)) pk = &pool_key;
      }
      if (pk == nullptr) {
        return bad(path,
                   "unknown setting \"" + key +
                       "\" (known: Store, Label, TTL, RetryInterval, Timeout, "
                       "MetricsFile, Events, "
                       "MaxOpenConnections, MaxIdleConnections, "
                       "ConnectionMaxLifetime, ConnectionMaxIdleTime)");
      }
      if (pk->count) {
        int n = 0;
        auto [p, ec] =
            std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec != std::errc() || p != value.data() + value.size() ||
            n < pk->min) {
          return bad(path, key + " \"" + value +
                               "\" is not a whole number of at least " +
                               std::to_string(pk->min));
        }
      } else {
        auto d = duration();
        if (!d.ok()) return std::move(d).error();
      }
      c.pool.emplace_back(pk->name, value);
    }
  }
  return c;
}

Result<std::string> store_url_with_pool(const CliConfig& config,
                                        const std::string& url) {
  if (config.pool.empty()) return url;
  const std::string scheme = lower(url.substr(0, url.find(':')));
  if (scheme != "postgres" && scheme != "postgresql") {
    return bad(config.path, config.pool.front().first +
                                " is a setting of the postgres:// store's "
                                "connection pool; the store is " +
                                scheme + ":");
  }
  const std::size_t q = url.find('?');
  // The keys the URL sets already, canonical.
  std::vector<std::string> present;
  if (q != std::string::npos) {
    std::string_view query(url);
    query.remove_prefix(q + 1);
    while (!query.empty()) {
      const std::size_t amp = query.find('&');
      const std::string_view item = query.substr(0, amp);
      present.push_back(canonical(std::string(item.substr(0, item.find('=')))));
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
  }
  std::string out = url;
  char sep = q == std::string::npos ? '?' : '&';
  for (const auto& [key, value] : config.pool) {
    for (const std::string& p : present) {
      if (p == canonical(key)) {
        return bad(config.path,
                   key + " is set both in the file and in the store URL");
      }
    }
    out += sep;
    out += key + "=" + value;
    sep = '&';
  }
  return out;
}

}  // namespace baton::cli
