// conformance/suite_secrets.cc — what a store shows must not carry a
// secret: the client's URL masks every password, and no error a holder or
// another client sees names an owner token (whoever knows a token can
// extend or release that lease).
#include <string>
#include <string_view>
#include <vector>

#include "baton/conformance.h"
#include "conformance/suite_helpers.h"

namespace baton::conformance {
namespace {

// The problems of `url` as shown: a userinfo password or a password,
// secret or token option whose value is not "***".
std::vector<std::string> unmasked(std::string_view url) {
  std::vector<std::string> out;
  const auto scheme_end = url.find("://");
  if (scheme_end != std::string_view::npos) {
    std::string_view rest = url.substr(scheme_end + 3);
    rest = rest.substr(0, rest.find_first_of("/?"));
    const auto at = rest.rfind('@');
    if (at != std::string_view::npos) {
      const std::string_view info = rest.substr(0, at);
      const auto colon = info.find(':');
      if (colon != std::string_view::npos && info.substr(colon + 1) != "***") {
        out.push_back("the userinfo's password");
      }
    }
  }
  const auto q = url.find('?');
  if (q == std::string_view::npos) return out;
  std::string_view query = url.substr(q + 1);
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view kv = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view()
                                          : query.substr(amp + 1);
    const auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    std::string key(kv.substr(0, eq));
    for (char& c : key) c = static_cast<char>(std::tolower(c));
    const bool secret = key.find("password") != std::string::npos ||
                        key.find("secret") != std::string::npos ||
                        key.find("token") != std::string::npos;
    // A file's path is not its content.
    const bool file = key.find("file") != std::string::npos;
    if (secret && !file && kv.substr(eq + 1) != "***") {
      out.push_back("option " + key);
    }
  }
  return out;
}

TEST_P(ConformanceTest, Secrets_NoUrlOrErrorShowsAPasswordOrAnOwnerToken) {
  for (const Client& c : {client(), open_client()}) {
    for (const std::string& what : unmasked(c.url())) {
      ADD_FAILURE() << "Client::url() shows " << what << ": " << c.url();
    }
  }
  const std::string name = lock_name("secrets");
  auto lease = client().try_acquire(name, opts(30s, 1, "secrets-holder"));
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  const std::string token = lease->token.to_string();
  std::vector<Error> seen;
  // Another client meets the holder: the answer names the holder's label.
  auto busy = open_client().try_acquire(name, opts(30s));
  ASSERT_FALSE(busy.ok());
  seen.push_back(busy.error());
  auto waited = open_client().acquire(name, 100ms, opts(30s));
  ASSERT_FALSE(waited.ok());
  seen.push_back(waited.error());
  ASSERT_TRUE(*client().release(*lease));
  // The lease is gone: its holder's extend says so.
  auto late = client().extend(*lease, 30s);
  ASSERT_FALSE(late.ok());
  seen.push_back(late.error());
  for (const Error& e : seen) {
    EXPECT_EQ(e.to_string().find(token), std::string::npos)
        << "an error shows the owner token: " << e.to_string();
  }
}

}  // namespace

int kLinkSuiteSecrets = 0;

}  // namespace baton::conformance
