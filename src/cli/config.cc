// cli/config.cc — the `baton` CLI's YAML config file.
#include "cli/config.h"

#include <yaml-cpp/yaml.h>

#include <charconv>

#include "core/duration.h"
#include "core/validate.h"

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

}  // namespace

Result<CliConfig> load_cli_config(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    return bad(path, std::string("cannot read it: ") + e.what());
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
      auto d = core::parse_duration(value);
      if (!d.ok()) return bad(path, key + ": " + d.error().message());
      return *d;
    };
    if (key == "Store") {
      if (value.empty()) return bad(path, "Store is empty");
      c.store = value;
    } else if (key == "Label") {
      if (Status st = core::validate_label(value); !st.ok()) {
        return bad(path, "Label: " + st.error().message());
      }
      c.label = value;
    } else if (key == "TTL") {
      auto d = duration();
      if (!d.ok()) return std::move(d).error();
      if (Status st = core::validate_ttl(*d); !st.ok()) {
        return bad(path, "TTL: " + st.error().message());
      }
      c.ttl = *d;
    } else if (key == "RetryInterval") {
      auto d = duration();
      if (!d.ok()) return std::move(d).error();
      c.retry_interval = *d;
    } else {
      const PoolKey* pk = nullptr;
      for (const PoolKey& k : kPoolKeys) {
        if (key == k.name) pk = &k;
      }
      if (pk == nullptr) {
        return bad(path, "unknown setting \"" + key +
                             "\" (known: Store, Label, TTL, RetryInterval, "
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
  std::string out = url;
  char sep = q == std::string::npos ? '?' : '&';
  const std::string query =
      q == std::string::npos ? "" : lower(url.substr(q + 1));
  for (const auto& [key, value] : config.pool) {
    const std::string k = lower(key);
    for (std::size_t at = query.find(k); at != std::string::npos;
         at = query.find(k, at + 1)) {
      if ((at == 0 || query[at - 1] == '&') &&
          query.compare(at + k.size(), 1, "=") == 0) {
        return bad(config.path, key +
                                    " is set both in the file and in the "
                                    "store URL");
      }
    }
    out += sep;
    out += key + "=" + value;
    sep = '&';
  }
  return out;
}

}  // namespace baton::cli
