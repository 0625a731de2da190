// core/url.h — store URL parsing (pure).
//
//   scheme://[user[:password]@]host:port[,host:port...][/path][?k=v&k=v]
//   scheme:opaque            (memory:, sqlite:/path/to/file.db)
//
// Percent-escapes (%XX) are decoded in user, password, path and query
// values. Errors are invalid_argument naming the problem with the password
// masked, e.g. `invalid_argument: store URL "redis://h:x" has a bad port "x"`.
//
// Thread safety: pure functions.
#ifndef BATON_CORE_URL_H_
#define BATON_CORE_URL_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"

namespace baton::core {

struct HostPort {
  std::string host;  // "127.0.0.1", "::1" (brackets removed), "localhost"
  std::uint16_t port = 0;
};

struct Url {
  std::string scheme;  // lower-case, without ":" or "://"
  std::string user;
  std::string password;
  std::vector<HostPort> hosts;  // empty for opaque URLs
  std::string path;             // without the leading '/'
  std::string opaque;           // for "scheme:rest" URLs without "//"
  std::map<std::string, std::string> query;
  // The URL with the password (and any password= query value) as "***".
  std::string safe() const;
};

// `default_port` fills hosts given without a port (0 = a port is required).
Result<Url> parse_url(std::string_view url, std::uint16_t default_port = 0);

}  // namespace baton::core

#endif  // BATON_CORE_URL_H_
