#include "server/acl.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <charconv>

namespace baton::server {

namespace {

constexpr std::string_view kScheme = "pbkdf2-sha256";
constexpr int kMinIterations = 1000;

std::string to_hex(const unsigned char* p, std::size_t n) {
  static const char* d = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out += d[p[i] >> 4];
    out += d[p[i] & 15];
  }
  return out;
}

bool from_hex(std::string_view s, std::string* out) {
  if (s.size() % 2 != 0) return false;
  out->clear();
  for (std::size_t i = 0; i < s.size(); i += 2) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(s.data() + i, s.data() + i + 2, v, 16);
    if (ec != std::errc() || p != s.data() + i + 2) return false;
    out->push_back(static_cast<char>(v));
  }
  return true;
}

struct Parsed {
  int iterations = 0;
  std::string salt, hash;  // raw bytes
};

bool parse_hash(std::string_view h, Parsed* p) {
  auto take = [&h](std::string_view* part) {
    auto at = h.find('$');
    *part = h.substr(0, at);
    h = at == std::string_view::npos ? std::string_view() : h.substr(at + 1);
    return at != std::string_view::npos;
  };
  std::string_view scheme, iter, salt;
  if (!take(&scheme) || scheme != kScheme || !take(&iter) || !take(&salt)) {
    return false;
  }
  auto [q, ec] =
      std::from_chars(iter.data(), iter.data() + iter.size(), p->iterations);
  if (ec != std::errc() || q != iter.data() + iter.size() ||
      p->iterations < kMinIterations) {
    return false;
  }
  return from_hex(salt, &p->salt) && p->salt.size() >= 8 &&
         from_hex(h, &p->hash) && p->hash.size() == 32;
}

bool derive(std::string_view password, const std::string& salt, int iterations,
            unsigned char out[32]) {
  return PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                           reinterpret_cast<const unsigned char*>(salt.data()),
                           static_cast<int>(salt.size()), iterations,
                           EVP_sha256(), 32, out) == 1;
}

}  // namespace

Result<unsigned> parse_perm(std::string_view w) {
  if (w == "read") return unsigned{kRead};
  if (w == "lock") return unsigned{kLock};
  if (w == "counter") return unsigned{kCounter};
  if (w == "admin") return unsigned{kAdmin};
  return Error(Errc::invalid_argument, "unknown permission \"" +
                                           std::string(w) +
                                           "\" (read, lock, counter, admin)");
}

const char* perm_name(unsigned perm) {
  switch (perm) {
    case kRead:
      return "read";
    case kLock:
      return "lock";
    case kCounter:
      return "counter";
    default:
      return "admin";
  }
}

Result<std::string> hash_password(std::string_view password, int iterations) {
  if (password.empty()) {
    return Error(Errc::invalid_argument, "the password is empty");
  }
  unsigned char salt[16];
  if (RAND_bytes(salt, sizeof salt) != 1) {
    return Error(Errc::internal, "no random bytes for the salt");
  }
  std::string s(reinterpret_cast<char*>(salt), sizeof salt);
  unsigned char out[32];
  if (!derive(password, s, iterations, out)) {
    return Error(Errc::internal, "PBKDF2 failed");
  }
  return std::string(kScheme) + "$" + std::to_string(iterations) + "$" +
         to_hex(salt, sizeof salt) + "$" + to_hex(out, sizeof out);
}

Status check_hash_format(const std::string& hash) {
  Parsed p;
  if (!parse_hash(hash, &p)) {
    return Error(Errc::invalid_argument,
                 "password_hash is not pbkdf2-sha256$<iterations >= 1000>$"
                 "<salt hex>$<64 hex digits> (make one with batond "
                 "--hash-password)");
  }
  return {};
}

bool equal_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool verify_password(const std::string& hash, std::string_view password) {
  Parsed p;
  if (!parse_hash(hash, &p)) return false;
  unsigned char out[32];
  if (!derive(password, p.salt, p.iterations, out)) return false;
  return equal_constant_time(
      std::string_view(reinterpret_cast<char*>(out), sizeof out), p.hash);
}

std::string quick_digest(const std::string& hash, std::string_view password) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  std::string in = hash;
  in.push_back('\0');
  in.append(password);
  SHA256(reinterpret_cast<const unsigned char*>(in.data()), in.size(), md);
  OPENSSL_cleanse(in.data(), in.size());
  return std::string(reinterpret_cast<char*>(md), sizeof md);
}

const User* authenticate(const std::vector<User>& users,
                         std::map<std::string, std::string>& cache,
                         std::string_view name, std::string_view password) {
  const User* found = nullptr;
  for (const auto& u : users) {
    if (u.name == name) found = &u;
  }
  if (found == nullptr) {
    if (!users.empty())
      (void)verify_password(users.front().password_hash, password);
    return nullptr;
  }
  const std::string quick = quick_digest(found->password_hash, password);
  auto it = cache.find(found->name);
  if (it != cache.end() && equal_constant_time(it->second, quick)) return found;
  if (!verify_password(found->password_hash, password)) return nullptr;
  cache[found->name] = quick;
  return found;
}

unsigned perms_on(const User& user, std::string_view name) {
  unsigned p = 0;
  for (const auto& r : user.rules) {
    if (name.substr(0, r.prefix.size()) == r.prefix) p |= r.perms;
  }
  return p;
}

bool may_list(const User& user, std::string_view prefix) {
  for (const auto& r : user.rules) {
    if ((r.perms & kRead) == 0) continue;
    if (prefix.substr(0, r.prefix.size()) == r.prefix) return true;
    if (std::string_view(r.prefix).substr(0, prefix.size()) == prefix) {
      return true;
    }
  }
  return false;
}

std::string describe_rules(const User& user) {
  std::string out;
  for (const auto& r : user.rules) {
    if (!out.empty()) out += ", ";
    out += "\"" + r.prefix + "\" (";
    bool first = true;
    for (unsigned b : {kRead, kLock, kCounter, kAdmin}) {
      if ((r.perms & b) == 0) continue;
      if (!first) out += " ";
      out += perm_name(b);
      first = false;
    }
    out += ")";
  }
  return out.empty() ? "none" : out;
}

}  // namespace baton::server
