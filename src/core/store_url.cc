// core/store_url.cc — the one parser of store URLs and their options
// (baton/store_descriptor.h).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "baton/duration.h"
#include "baton/store_descriptor.h"
#include "core/url.h"

namespace baton {
namespace {

// "RequestTimeout", "request_timeout" and "request-timeout" are one key.
std::string canonical(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    if (c == '_' || c == '-') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

Error bad_url(const std::string& safe, const std::string& why) {
  return Error(Errc::invalid_argument, "store URL \"" + safe + "\": " + why);
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// A bare whole number in a duration option means milliseconds (the older
// `timeout_ms=5000` spellings); anything else is a duration as written.
Result<milliseconds> option_duration(const std::string& value) {
  if (!value.empty() &&
      value.find_first_not_of("0123456789") == std::string::npos &&
      value.size() < 16) {
    return milliseconds(std::stoll(value));
  }
  return parse_duration(value);
}

// Checks `value` against `spec`'s type; "" = fine, else why not.
std::string check_value(const OptionSpec& spec, const std::string& value) {
  switch (spec.type) {
    case OptionType::duration: {
      auto d = option_duration(value);
      if (!d.ok()) return d.error().message();
      if (d->count() < 0 || (d->count() == 0 && !spec.zero_ok)) {
        return "must be positive";
      }
      return "";
    }
    case OptionType::count: {
      std::int64_t v = 0;
      auto [p, ec] =
          std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || p != value.data() + value.size()) {
        return "\"" + value + "\" is not a whole number";
      }
      if (v < spec.min_count) {
        return "must be at least " + std::to_string(spec.min_count);
      }
      return "";
    }
    case OptionType::flag: {
      const std::string v = canonical(value);
      if (v == "1" || v == "0" || v == "true" || v == "false" || v == "yes" ||
          v == "no" || v == "on" || v == "off") {
        return "";
      }
      return "\"" + value + "\" is not a flag (1/0, true/false, yes/no)";
    }
    case OptionType::choice:
      if (std::find(spec.choices.begin(), spec.choices.end(), value) !=
          spec.choices.end()) {
        return "";
      }
      return "\"" + value + "\" must be one of " + join(spec.choices, ", ");
    case OptionType::file:
      if (value.empty()) return "empty path";
      if (::access(value.c_str(), R_OK) != 0) {
        return value + ": cannot read it: " + std::strerror(errno);
      }
      return "";
    case OptionType::text:
    case OptionType::secret:
      return "";
  }
  return "";
}

const OptionSpec* find_option(const StoreDescriptor& d, std::string_view key) {
  const std::string k = canonical(key);
  for (const auto& o : d.options) {
    if (canonical(o.key) == k) return &o;
    for (const auto& a : o.aliases) {
      if (canonical(a) == k) return &o;
    }
  }
  return nullptr;
}

// The URL as shown in messages: password and secret options masked.
std::string masked(const core::Url& u, const StoreDescriptor& d) {
  std::string s = u.safe();
  for (const auto& [k, v] : u.query) {
    const OptionSpec* o = find_option(d, k);
    if (o == nullptr || o->type != OptionType::secret || v.empty()) continue;
    const std::string needle = k + "=";
    for (std::size_t at = s.find(needle); at != std::string::npos;
         at = s.find(needle, at + 1)) {
      const std::size_t start = at + needle.size();
      const std::size_t end = std::min(s.find('&', start), s.size());
      s.replace(start, end - start, "***");
    }
  }
  return s;
}

// scheme://path and scheme:///abs/path (file URLs): the part before '?'
// is a path, never an authority. Relative paths are made absolute.
Result<core::Url> parse_file_url(std::string_view url,
                                 const std::string& name) {
  auto bad = [&](const std::string& why) {
    // Never echo an authority: it may carry a password.
    return Error(Errc::invalid_argument, name + " store URL: " + why);
  };
  const std::size_t colon = url.find(':');
  std::string scheme(url.substr(0, colon));
  std::string_view rest = url.substr(colon + 1);
  std::string_view query;
  if (std::size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (rest.substr(0, 2) == "//") {
    rest = rest.substr(2);
    if (rest.empty() || (rest.front() != '/' && rest.front() != '.')) {
      return bad(scheme + ":// takes a file path (" + scheme +
                 ":///abs/path.db or " + scheme + "://./rel.db), not a host");
    }
  }
  while (rest.size() > 1 && rest[0] == '/' && rest[1] == '/') {
    rest = rest.substr(1);
  }
  if (rest.empty()) {
    return bad("needs a file path (" + scheme + ":///abs/path.db or " + scheme +
               "://./rel.db)");
  }
  // The opaque form decodes the path and the query.
  std::string text = scheme + ":" + std::string(rest);
  if (!query.empty()) text += "?" + std::string(query);
  auto parsed = core::parse_url(text);
  if (!parsed.ok()) return std::move(parsed).error();
  core::Url u = std::move(*parsed);
  u.path = std::move(u.opaque);
  u.opaque.clear();
  if (u.path.empty() || u.path.back() == '/') {
    return bad("path \"" + u.path + "\" names a directory, not a file");
  }
  if (u.path.front() != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) == nullptr) {
      return bad("cannot resolve relative path \"" + u.path + "\"");
    }
    std::string rel = u.path;
    while (rel.substr(0, 2) == "./") rel = rel.substr(2);
    u.path = std::string(cwd) + "/" + rel;
  }
  return u;
}

}  // namespace

namespace {
OptionSpec option(std::string key, OptionType type, std::string default_value,
                  std::string help) {
  OptionSpec o;
  o.key = std::move(key);
  o.type = type;
  o.default_value = std::move(default_value);
  o.help = std::move(help);
  return o;
}
}  // namespace

OptionSpec duration_option(std::string key, std::string default_value,
                           std::string help) {
  return option(std::move(key), OptionType::duration, std::move(default_value),
                std::move(help));
}

OptionSpec count_option(std::string key, std::string default_value,
                        std::int64_t min, std::string help) {
  OptionSpec o = option(std::move(key), OptionType::count,
                        std::move(default_value), std::move(help));
  o.min_count = min;
  return o;
}

OptionSpec flag_option(std::string key, std::string default_value,
                       std::string help) {
  return option(std::move(key), OptionType::flag, std::move(default_value),
                std::move(help));
}

OptionSpec text_option(std::string key, std::string default_value,
                       std::string help) {
  return option(std::move(key), OptionType::text, std::move(default_value),
                std::move(help));
}

OptionSpec choice_option(std::string key, std::string default_value,
                         std::vector<std::string> choices, std::string help) {
  OptionSpec o = option(std::move(key), OptionType::choice,
                        std::move(default_value), std::move(help));
  o.choices = std::move(choices);
  return o;
}

OptionSpec file_option(std::string key, std::string help) {
  return option(std::move(key), OptionType::file, "", std::move(help));
}

OptionSpec secret_option(std::string key, std::string help) {
  return option(std::move(key), OptionType::secret, "", std::move(help));
}

OptionSpec request_timeout_option(std::string default_value) {
  return duration_option("request_timeout", std::move(default_value),
                         "longest wait for one answer of the store");
}

OptionSpec connect_timeout_option(std::string default_value) {
  return duration_option("connect_timeout", std::move(default_value),
                         "longest wait for a new connection");
}

OptionSpec recheck_interval_option(std::string default_value) {
  return duration_option("recheck_interval", std::move(default_value),
                         "a waiter nobody wakes looks again after 1x..3x this");
}

OptionSpec prefix_option(std::string default_value, std::string help) {
  return text_option("prefix", std::move(default_value), std::move(help));
}

std::vector<OptionSpec> password_options(const std::string& env_name) {
  return {
      secret_option("password",
                    "the password (or in the URL's user part; masked "
                    "wherever the URL is shown)"),
      file_option(
          "password_file",
          "file whose first line is the password (mode 0600 or "
          "0400)" +
              (env_name.empty() ? std::string() : "; else $" + env_name)),
  };
}

Result<std::string> store_password(const StoreUrl& url,
                                   std::string_view env_name) {
  const OptionValues& o = url.options;
  auto bad = [&](const std::string& why) {
    return Error(Errc::invalid_argument,
                 "store URL \"" + url.safe + "\": " + why);
  };
  const bool inline_given = o.given("password") || !url.password.empty();
  if (o.given("password_file")) {
    const std::string& path = o.text("password_file");
    if (inline_given) {
      return bad("give the password in the URL or in password_file, not both");
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return bad("password_file \"" + path + "\" is not a readable file");
    }
    if ((st.st_mode & 077) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o",
                    static_cast<unsigned>(st.st_mode & 07777));
      return bad("password_file \"" + path + "\" has mode " + mode +
                 ": other users may read it; chmod 600 it");
    }
    std::ifstream in(path);
    std::string line;
    if (!in || !std::getline(in, line)) {
      return bad("password_file \"" + path + "\" has no first line");
    }
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) {
      line.pop_back();
    }
    if (line.empty()) {
      return bad("password_file \"" + path + "\" has an empty first line");
    }
    return line;
  }
  if (o.given("password")) return o.text("password");
  if (!url.password.empty()) return url.password;
  if (!env_name.empty()) {
    if (const char* env = std::getenv(std::string(env_name).c_str())) {
      return std::string(env);
    }
  }
  return std::string();
}

bool OptionValues::given(std::string_view key) const {
  auto it = values_.find(key);
  return it != values_.end() && it->second.second;
}

const std::string& OptionValues::raw(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) {
    // A store asked for an option its descriptor does not declare.
    std::fprintf(stderr, "baton: option \"%.*s\" is not declared\n",
                 static_cast<int>(key.size()), key.data());
    std::abort();
  }
  return it->second.first;
}

milliseconds OptionValues::duration(std::string_view key) const {
  const std::string& v = raw(key);
  if (v.empty()) return milliseconds::zero();
  auto d = option_duration(v);
  return d.ok() ? *d : milliseconds::zero();
}

std::int64_t OptionValues::count(std::string_view key) const {
  const std::string& v = raw(key);
  std::int64_t n = 0;
  std::from_chars(v.data(), v.data() + v.size(), n);
  return n;
}

bool OptionValues::flag(std::string_view key) const {
  const std::string v = canonical(raw(key));
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

const std::string& OptionValues::text(std::string_view key) const {
  return raw(key);
}

void OptionValues::set(std::string key, std::string value, bool given) {
  values_[std::move(key)] = {std::move(value), given};
}

Result<StoreUrl> parse_store_url(std::string_view url,
                                 const StoreDescriptor& d) {
  auto parsed = d.file_url ? parse_file_url(url, d.name)
                           : core::parse_url(url, d.default_port);
  if (!parsed.ok()) return std::move(parsed).error();
  core::Url& u = *parsed;
  StoreUrl out;
  out.safe = masked(u, d);
  if (!d.file_url && d.hosts_required && u.hosts.empty()) {
    return bad_url(out.safe, d.name + " needs a host (" + d.url_form + ")");
  }
  for (const auto& o : d.options)
    out.options.set(o.key, o.default_value, false);
  for (const auto& [key, value] : u.query) {
    const OptionSpec* o = find_option(d, key);
    if (o == nullptr) {
      std::vector<std::string> known;
      for (const auto& k : d.options) known.push_back(k.key);
      return bad_url(
          out.safe,
          "unknown option \"" + key + "\" for " + d.name +
              (known.empty() ? std::string(" (it takes none)")
                             : " (known: " + join(known, ", ") + ")"));
    }
    if (out.options.given(o->key)) {
      return bad_url(out.safe, "option \"" + o->key + "\" is given twice");
    }
    if (std::string why = check_value(*o, value); !why.empty()) {
      return bad_url(out.safe, o->key + ": " + why);
    }
    out.options.set(o->key, value, true);
  }
  out.scheme = std::move(u.scheme);
  out.user = std::move(u.user);
  out.password = std::move(u.password);
  for (auto& h : u.hosts) out.hosts.push_back({std::move(h.host), h.port});
  out.path = std::move(u.path);
  out.opaque = std::move(u.opaque);
  return out;
}

}  // namespace baton
