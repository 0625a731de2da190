// stores/sqlite/options.cc — sqlite:// URL settings.
#include <unistd.h>

#include <cctype>
#include <charconv>

#include "core/duration.h"
#include "core/url.h"
#include "stores/sqlite/sqlite_store.h"

namespace baton::store::sq {
namespace {

std::string canonical(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '_' || c == '-') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
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

Result<StoreOptions> parse_options(std::string_view url) {
  auto bad = [&](const std::string& why) {
    // Never echo an authority: it may carry a password.
    return Error(Errc::invalid_argument, "sqlite store URL: " + why);
  };
  const std::size_t colon = url.find(':');
  std::string scheme(url.substr(0, colon));
  for (auto& c : scheme) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (colon == std::string_view::npos || scheme != "sqlite") {
    return bad("not a sqlite URL");
  }
  std::string_view rest = url.substr(colon + 1);
  std::string_view query;
  if (std::size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (rest.substr(0, 2) == "//") {
    rest = rest.substr(2);
    if (rest.empty() || (rest.front() != '/' && rest.front() != '.')) {
      return bad(
          "sqlite:// takes a file path (sqlite:///abs/path.db or "
          "sqlite://./rel.db), not a host");
    }
  }
  while (rest.size() > 1 && rest[0] == '/' && rest[1] == '/') {
    rest = rest.substr(1);
  }
  if (rest.empty()) {
    return bad(
        "needs a file path (sqlite:///abs/path.db or sqlite://./rel.db)");
  }
  // core::parse_url decodes the path (opaque form) and the query.
  std::string text = "sqlite:" + std::string(rest);
  if (!query.empty()) text += "?" + std::string(query);
  auto parsed = core::parse_url(text);
  if (!parsed.ok()) return std::move(parsed).error();
  StoreOptions o;
  o.path = parsed->opaque;
  if (o.path.empty() || o.path.back() == '/') {
    return bad("path \"" + o.path + "\" names a directory, not a file");
  }
  if (o.path.front() != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) == nullptr) {
      return bad("cannot resolve relative path \"" + o.path + "\"");
    }
    std::string rel = o.path;
    while (rel.substr(0, 2) == "./") rel = rel.substr(2);
    o.path = std::string(cwd) + "/" + rel;
  }
  for (const auto& [key, value] : parsed->query) {
    const std::string k = canonical(key);
    auto duration = [&](milliseconds* out) -> Status {
      auto d = core::parse_duration(value);
      if (!d.ok()) return bad(key + ": " + d.error().message());
      if (d->count() <= 0) return bad(key + " must be positive");
      *out = *d;
      return {};
    };
    Status st;
    if (k == "prefix") {
      if (!valid_identifier(value, 32)) {
        return bad("prefix \"" + value +
                   "\" must match [a-z0-9_]+ (at most 32 bytes)");
      }
      o.prefix = value;
    } else if (k == "maxidle") {
      int v = 0;
      auto [p, ec] =
          std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || p != value.data() + value.size() || v < 0 ||
          v > 10000) {
        return bad(key + " \"" + value + "\" is not a count in 0..10000");
      }
      o.max_idle = v;
    } else if (k == "requesttimeout") {
      st = duration(&o.request_timeout);
    } else if (k == "waitertimeout") {
      st = duration(&o.waiter_timeout);
    } else if (k == "recheckmax") {
      st = duration(&o.recheck_max);
    } else {
      return bad("unknown setting \"" + key + "\"");
    }
    if (!st.ok()) return st.error();
  }
  return o;
}

}  // namespace baton::store::sq
