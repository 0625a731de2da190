// stores/zookeeper/zk_acl.cc — digest ids (SHA1, base64) and the store's
// ACL. SHA1 is here because ZooKeeper's digest scheme is defined with it
// (its id is the identity, not a secret's protection) and baton links no
// crypto library; it is checked against ZooKeeper's own ids in
// zk_node_test (known vectors) and zookeeper_security_test (the server's).
#include "stores/zookeeper/zk_acl.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>

namespace baton::store::zk {
namespace {

std::uint32_t rotl(std::uint32_t x, int n) {
  return (x << n) | (x >> (32 - n));
}

std::array<std::uint8_t, 20> sha1(std::string_view text) {
  std::uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u,
                        0xC3D2E1F0u};
  std::string m(text);
  const std::uint64_t bits = static_cast<std::uint64_t>(text.size()) * 8;
  m.push_back(static_cast<char>(0x80));
  while (m.size() % 64 != 56) m.push_back('\0');
  for (int i = 7; i >= 0; --i) m.push_back(static_cast<char>(bits >> (8 * i)));
  for (std::size_t off = 0; off < m.size(); off += 64) {
    std::uint32_t w[80];
    for (int i = 0; i < 16; ++i) {
      const auto* p = reinterpret_cast<const unsigned char*>(&m[off + 4 * i]);
      w[i] = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
             (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
    }
    for (int i = 16; i < 80; ++i) {
      w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    }
    std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; ++i) {
      std::uint32_t f = 0, k = 0;
      if (i < 20) {
        f = (b & c) | (~b & d);
        k = 0x5A827999u;
      } else if (i < 40) {
        f = b ^ c ^ d;
        k = 0x6ED9EBA1u;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8F1BBCDCu;
      } else {
        f = b ^ c ^ d;
        k = 0xCA62C1D6u;
      }
      const std::uint32_t t = rotl(a, 5) + f + e + k + w[i];
      e = d;
      d = c;
      c = rotl(b, 30);
      b = a;
      a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
  }
  std::array<std::uint8_t, 20> out{};
  for (int i = 0; i < 20; ++i) {
    out[i] = static_cast<std::uint8_t>(h[i / 4] >> (24 - 8 * (i % 4)));
  }
  return out;
}

constexpr char kB64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64(const std::uint8_t* p, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; i += 3) {
    const std::uint32_t v = (std::uint32_t{p[i]} << 16) |
                            (i + 1 < n ? std::uint32_t{p[i + 1]} << 8 : 0) |
                            (i + 2 < n ? std::uint32_t{p[i + 2]} : 0);
    out.push_back(kB64[(v >> 18) & 63]);
    out.push_back(kB64[(v >> 12) & 63]);
    out.push_back(i + 1 < n ? kB64[(v >> 6) & 63] : '=');
    out.push_back(i + 2 < n ? kB64[v & 63] : '=');
  }
  return out;
}

std::string perms_text(int perms) {
  // zkCli's order and letters.
  std::string s;
  if (perms & kPermCreate) s += 'c';
  if (perms & kPermDelete) s += 'd';
  if (perms & kPermRead) s += 'r';
  if (perms & kPermWrite) s += 'w';
  if (perms & kPermAdmin) s += 'a';
  return s.empty() ? "-" : s;
}

}  // namespace

std::string sha1_base64(std::string_view text) {
  const auto d = sha1(text);
  return base64(d.data(), d.size());
}

std::string digest_id(std::string_view user, std::string_view password) {
  const std::string both = std::string(user) + ":" + std::string(password);
  return std::string(user) + ":" + sha1_base64(both);
}

bool valid_digest_id(std::string_view id) {
  const auto colon = id.find(':');
  if (colon == 0 || colon == std::string_view::npos) return false;
  const std::string_view hash = id.substr(colon + 1);
  if (hash.size() != 28 || hash.back() != '=') return false;
  return std::all_of(hash.begin(), hash.end() - 1, [](char c) {
    return std::string_view(kB64, 64).find(c) != std::string_view::npos;
  });
}

std::vector<AclEntry> store_acl(std::string_view user,
                                std::string_view password,
                                const std::vector<std::string>& admin_ids) {
  if (user.empty()) return {AclEntry{"world", "anyone", kPermAll}};
  std::vector<AclEntry> acl = {
      AclEntry{"digest", digest_id(user, password), kPermAll}};
  for (const auto& id : admin_ids) {
    AclEntry e{"digest", id, kPermAll};
    if (std::find(acl.begin(), acl.end(), e) == acl.end()) acl.push_back(e);
  }
  return acl;
}

bool same_acl(std::vector<AclEntry> a, std::vector<AclEntry> b) {
  auto key = [](const AclEntry& e) {
    return std::tie(e.scheme, e.id, e.perms);
  };
  auto less = [&](const AclEntry& x, const AclEntry& y) {
    return key(x) < key(y);
  };
  std::sort(a.begin(), a.end(), less);
  std::sort(b.begin(), b.end(), less);
  return a == b;
}

std::string format_acl(const std::vector<AclEntry>& acl,
                       std::string_view own_id) {
  if (acl.empty()) return "(none)";
  std::string s;
  for (const auto& e : acl) {
    if (!s.empty()) s += ", ";
    std::string id = e.id;
    if (!own_id.empty() && e.scheme == "digest" && id == own_id) {
      id = id.substr(0, id.find(':')) + ":<hash of the given password>";
    }
    s += e.scheme + ":" + id + ":" + perms_text(e.perms);
  }
  return s;
}

}  // namespace baton::store::zk
