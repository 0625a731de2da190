// core/url.cc — store URL parsing and password-masked rendering.
#include "core/url.h"

#include <cctype>

namespace baton::core {

namespace {

bool is_unreserved(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

// Replaces the password in a raw URL (userinfo and password= query values)
// with "***", for error messages.
std::string mask_raw(std::string_view url) {
  std::string out(url);
  std::size_t scheme_end = out.find("://");
  if (scheme_end != std::string::npos) {
    std::size_t auth = scheme_end + 3;
    std::size_t auth_end = out.find_first_of("/?", auth);
    if (auth_end == std::string::npos) auth_end = out.size();
    std::size_t at = out.rfind('@', auth_end == 0 ? 0 : auth_end - 1);
    if (at != std::string::npos && at >= auth) {
      std::size_t colon = out.find(':', auth);
      if (colon != std::string::npos && colon < at) {
        out.replace(colon + 1, at - colon - 1, "***");
      }
    }
  }
  std::size_t q = out.find('?');
  while (q != std::string::npos) {
    std::size_t start = q + 1;
    std::size_t end = out.find('&', start);
    if (end == std::string::npos) end = out.size();
    std::string_view pair(out.data() + start, end - start);
    if (pair.substr(0, 9) == "password=") {
      out.replace(start + 9, end - start - 9, "***");
      end = start + 12;
    }
    q = end < out.size() ? end : std::string::npos;
  }
  return out;
}

class Parser {
 public:
  explicit Parser(std::string_view url) : url_(url) {}

  Error fail(const std::string& why) const {
    std::string shown = mask_raw(url_);
    if (shown.size() > 200) shown = shown.substr(0, 200) + "...";
    return Error(Errc::invalid_argument, "store URL \"" + shown + "\" " + why);
  }

  // Decodes %XX escapes; refuses control characters and spaces.
  Result<std::string> decode(std::string_view in, std::string_view what) const {
    std::string out;
    out.reserve(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      char c = in[i];
      if (c == '%') {
        if (i + 2 >= in.size()) {
          return fail("has a truncated percent-escape in its " +
                      std::string(what));
        }
        int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
        if (hi < 0 || lo < 0) {
          return fail("has a bad percent-escape in its " + std::string(what));
        }
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
      } else if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f ||
                 c == '#') {
        return fail("has an unexpected character in its " + std::string(what));
      } else {
        out += c;
      }
    }
    return out;
  }

  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  Result<std::uint16_t> port(std::string_view text) const {
    if (text.empty() || text.size() > 5) {
      return fail("has a bad port \"" + std::string(text) + "\"");
    }
    unsigned value = 0;
    for (char c : text) {
      if (c < '0' || c > '9') {
        return fail("has a bad port \"" + std::string(text) + "\"");
      }
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (value == 0 || value > 65535) {
      return fail("has a port out of range \"" + std::string(text) +
                  "\" (1..65535)");
    }
    return static_cast<std::uint16_t>(value);
  }

  Result<HostPort> host(std::string_view text,
                        std::uint16_t default_port) const {
    HostPort hp;
    std::string_view rest;
    if (!text.empty() && text.front() == '[') {
      std::size_t close = text.find(']');
      if (close == std::string_view::npos) {
        return fail("has an IPv6 address without a closing ']'");
      }
      std::string_view addr = text.substr(1, close - 1);
      if (addr.empty()) return fail("has an empty host");
      for (char c : addr) {
        if (hex(c) < 0 && c != ':' && c != '.' && c != '%') {
          return fail("has an unexpected character in IPv6 address \"" +
                      std::string(addr) + "\"");
        }
      }
      hp.host = std::string(addr);
      rest = text.substr(close + 1);
      if (!rest.empty() && rest.front() != ':') {
        return fail("has unexpected text after IPv6 address \"" +
                    std::string(addr) + "\"");
      }
    } else {
      std::size_t colon = text.find(':');
      std::string_view name = text.substr(0, colon);
      if (name.empty()) return fail("has an empty host");
      for (char c : name) {
        if (!is_unreserved(c) || c == '~') {
          return fail("has an unexpected character in host \"" +
                      std::string(name) + "\"");
        }
      }
      hp.host = std::string(name);
      rest = colon == std::string_view::npos ? std::string_view{}
                                             : text.substr(colon);
    }
    if (rest.empty()) {
      if (default_port == 0) {
        return fail("has no port for host \"" + hp.host + "\"");
      }
      hp.port = default_port;
    } else {
      auto p = port(rest.substr(1));
      if (!p.ok()) return std::move(p).error();
      hp.port = *p;
    }
    return hp;
  }

  Status query(std::string_view text, Url& url) const {
    std::size_t pos = 0;
    while (pos <= text.size()) {
      std::size_t amp = text.find('&', pos);
      if (amp == std::string_view::npos) amp = text.size();
      std::string_view pair = text.substr(pos, amp - pos);
      pos = amp + 1;
      if (pair.empty()) continue;
      std::size_t eq = pair.find('=');
      auto key = decode(pair.substr(0, eq), "query");
      if (!key.ok()) return std::move(key).error();
      if (key->empty()) return fail("has a query parameter without a name");
      std::string value;
      if (eq != std::string_view::npos) {
        auto v = decode(pair.substr(eq + 1), "query");
        if (!v.ok()) return std::move(v).error();
        value = std::move(*v);
      }
      url.query[std::move(*key)] = std::move(value);
    }
    return {};
  }

  Result<Url> parse(std::uint16_t default_port) const {
    std::string_view s = url_;
    if (s.empty()) return fail("is empty");
    std::size_t colon = s.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return fail("has no scheme (expected scheme://... or scheme:...)");
    }
    Url url;
    for (std::size_t i = 0; i < colon; ++i) {
      char c = s[i];
      bool ok = std::isalpha(static_cast<unsigned char>(c)) ||
                (i > 0 && (std::isdigit(static_cast<unsigned char>(c)) ||
                           c == '+' || c == '-' || c == '.'));
      if (!ok) return fail("has a bad scheme");
      url.scheme +=
          static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    std::string_view rest = s.substr(colon + 1);
    std::string_view query_text;
    bool has_query = false;
    if (std::size_t q = rest.find('?'); q != std::string_view::npos) {
      query_text = rest.substr(q + 1);
      rest = rest.substr(0, q);
      has_query = true;
    }
    if (rest.substr(0, 2) != "//") {
      auto opaque = decode(rest, "path");
      if (!opaque.ok()) return std::move(opaque).error();
      url.opaque = std::move(*opaque);
    } else {
      rest = rest.substr(2);
      std::size_t slash = rest.find('/');
      std::string_view authority = rest.substr(0, slash);
      if (slash != std::string_view::npos) {
        auto path = decode(rest.substr(slash + 1), "path");
        if (!path.ok()) return std::move(path).error();
        url.path = std::move(*path);
      }
      if (std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
        std::string_view userinfo = authority.substr(0, at);
        authority = authority.substr(at + 1);
        std::size_t pc = userinfo.find(':');
        auto user = decode(userinfo.substr(0, pc), "user");
        if (!user.ok()) return std::move(user).error();
        url.user = std::move(*user);
        if (pc != std::string_view::npos) {
          auto pw = decode(userinfo.substr(pc + 1), "password");
          if (!pw.ok()) return std::move(pw).error();
          url.password = std::move(*pw);
        }
      }
      if (authority.empty()) return fail("has an empty host");
      std::size_t pos = 0;
      while (pos <= authority.size()) {
        std::size_t comma = authority.find(',', pos);
        if (comma == std::string_view::npos) comma = authority.size();
        auto hp = host(authority.substr(pos, comma - pos), default_port);
        if (!hp.ok()) return std::move(hp).error();
        url.hosts.push_back(std::move(*hp));
        pos = comma + 1;
      }
    }
    if (has_query) {
      if (Status st = query(query_text, url); !st.ok()) return st.error();
    }
    return url;
  }

 private:
  std::string_view url_;
};

std::string encode(std::string_view in, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : in) {
    if (is_unreserved(c) || (keep_slash && c == '/')) {
      out += c;
    } else {
      auto u = static_cast<unsigned char>(c);
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    }
  }
  return out;
}

}  // namespace

std::string Url::safe() const {
  std::string out = scheme + ":";
  if (hosts.empty()) {
    out += encode(opaque, true);
  } else {
    out += "//";
    if (!user.empty() || !password.empty()) {
      out += encode(user, false);
      if (!password.empty()) out += ":***";
      out += '@';
    }
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      if (i > 0) out += ',';
      if (hosts[i].host.find(':') != std::string::npos) {
        out += '[' + hosts[i].host + ']';
      } else {
        out += hosts[i].host;
      }
      out += ':' + std::to_string(hosts[i].port);
    }
    if (!path.empty()) out += '/' + encode(path, true);
  }
  bool first = true;
  for (const auto& [key, value] : query) {
    out += first ? '?' : '&';
    first = false;
    out += encode(key, false) + '=' +
           (key == "password" ? std::string("***") : encode(value, false));
  }
  return out;
}

Result<Url> parse_url(std::string_view url, std::uint16_t default_port) {
  return Parser(url).parse(default_port);
}

}  // namespace baton::core
