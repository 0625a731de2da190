// baton/store_descriptor.h — one descriptor per store: its URL schemes, its
// typed options (one vocabulary across stores), and its open function.
//
//   baton::StoreDescriptor d;
//   d.name = "mine";
//   d.schemes = {"mine"};
//   d.summary = "my engine's locks";
//   d.url_form = "mine://host[:port]/space";
//   d.default_port = 7000;
//   d.options = {baton::request_timeout_option(),
//                baton::text_option("space", "locks", "key space")};
//   d.open = [](const baton::StoreUrl& url) { ... };
//   baton::register_store(std::move(d));
//
// The registry, `baton --help`, the docs' option tables, the conformance
// instantiations and the torture harness all read descriptors, so a new
// store is its folder plus one line in the registry (docs/design.md,
// "Adding a store").
//
// Options are URL query parameters. One parser (this header's
// parse_store_url) reads them for every store: keys match ignoring case,
// '_' and '-' ("RequestTimeout" = "request_timeout"); a key a store does
// not declare is refused with the key named; every value is checked
// against its type before the store sees it; options not given take their
// declared default. The same key means the same thing on every store.
//
// Thread safety: descriptors are immutable values; register_store() and
// open_store() may be called from any thread.
#ifndef BATON_STORE_DESCRIPTOR_H_
#define BATON_STORE_DESCRIPTOR_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "baton/store.h"

namespace baton {

enum class OptionType {
  duration,  // "5s", "250ms", "2m"; a bare number is milliseconds
  count,     // a whole number >= min_count
  flag,      // 1/0, true/false, yes/no, on/off
  text,      // any string (may be empty)
  choice,    // one of `choices`
  file,      // a path that must be readable now
  secret,    // a string masked as *** wherever the URL is shown
};

struct OptionSpec {
  std::string key;  // canonical spelling, snake_case
  OptionType type = OptionType::text;
  std::string default_value;         // as it would be written in the URL; "" =
                                     // none (given() tells)
  std::string help;                  // one line for --help and the docs
  std::vector<std::string> choices;  // OptionType::choice
  std::int64_t min_count = 0;        // OptionType::count
  std::vector<std::string> aliases;  // older spellings, still accepted
  bool zero_ok = false;  // OptionType::duration: 0 is accepted (e.g. "no
                         // limit"); otherwise a duration must be positive
};

// One option of each type (aliases and the rest may be set afterwards).
OptionSpec duration_option(std::string key, std::string default_value,
                           std::string help);
OptionSpec count_option(std::string key, std::string default_value,
                        std::int64_t min, std::string help);
OptionSpec flag_option(std::string key, std::string default_value,
                       std::string help);
OptionSpec text_option(std::string key, std::string default_value,
                       std::string help);
OptionSpec choice_option(std::string key, std::string default_value,
                         std::vector<std::string> choices, std::string help);
OptionSpec file_option(std::string key, std::string help);
OptionSpec secret_option(std::string key, std::string help);

// The options shared by stores that have them: one key, one meaning.
OptionSpec request_timeout_option(std::string default_value = "5s");
OptionSpec connect_timeout_option(std::string default_value = "5s");
OptionSpec recheck_interval_option(std::string default_value = "100ms");
OptionSpec prefix_option(std::string default_value, std::string help);
// `password` (a secret) and `password_file`; `env_name`, if not empty, is
// named in the help as the last place a password is looked for.
std::vector<OptionSpec> password_options(const std::string& env_name);

// Option values after parsing: every declared option is present, with its
// given value or its default.
class OptionValues {
 public:
  // Whether the URL gave the option (rather than its default).
  bool given(std::string_view key) const;
  milliseconds duration(std::string_view key) const;
  std::int64_t count(std::string_view key) const;
  bool flag(std::string_view key) const;
  // text, choice, file and secret values.
  const std::string& text(std::string_view key) const;

  // For the parser: `key` must be declared (aborts otherwise: a bug).
  void set(std::string key, std::string value, bool given);

 private:
  const std::string& raw(std::string_view key) const;
  std::map<std::string, std::pair<std::string, bool>, std::less<>> values_;
};

struct HostPort {
  std::string host;  // "127.0.0.1", "::1" (brackets removed), "localhost"
  std::uint16_t port = 0;
};

// A store URL, parsed and checked against its store's descriptor.
//   scheme://[user[:password]@]host[:port][,host[:port]...][/path][?k=v...]
//   scheme:opaque                        (memory:)
//   scheme://path or scheme:///abs/path  (stores whose URL names a file)
struct StoreUrl {
  std::string scheme;  // lower-case, without ":" or "://"
  std::string user;
  std::string password;
  std::vector<HostPort> hosts;  // empty for opaque and file URLs
  std::string path;             // without the leading '/' (host URLs); the
                                // file's path (file URLs)
  std::string opaque;           // "scheme:rest" URLs without "//"
  OptionValues options;
  // The URL with the password and secret options as "***".
  std::string safe;
};

struct StoreDescriptor {
  std::string name;                  // "postgres"
  std::vector<std::string> schemes;  // {"postgres", "postgresql"}
  std::string summary;               // one line for --help
  std::string url_form;              // how its URL is written
  std::uint16_t default_port = 0;    // for hosts given without a port
  bool hosts_required = true;        // host URLs: at least one host
  bool file_url = false;             // scheme://path names a file
  std::vector<OptionSpec> options;
  std::function<Result<std::unique_ptr<Store>>(const StoreUrl& url)> open;
};

// A store's password, from the first place that has one: the `password`
// option, the URL's userinfo, the first line of `password_file` (which must
// not be readable or writable by other users: the error names the path and
// its mode, never the content), then the environment variable `env_name`
// (skipped if empty). "" if none has one. The store must declare
// password_options(). Giving both a password and a password_file is
// invalid_argument.
Result<std::string> store_password(const StoreUrl& url,
                                   std::string_view env_name);

// Parses `url` for `d`: invalid_argument naming the URL (password masked)
// and the problem (an unknown key, a bad value, a missing host).
Result<StoreUrl> parse_store_url(std::string_view url,
                                 const StoreDescriptor& d);

// Registers a store (or replaces the one registered with one of its
// schemes, e.g. a fault-injecting wrapper in tests). Returns false, and
// registers nothing, if the descriptor has no name, no scheme or no open
// function.
bool register_store(StoreDescriptor descriptor);

// Every store this binary can open (built in and registered), by name.
std::vector<StoreDescriptor> store_descriptors();

// Opens a store from its URL; invalid_argument for an unknown scheme (the
// message lists the known ones, and names the build option of a store that
// is not built in) or a malformed URL; unavailable if the store cannot be
// reached.
Result<std::unique_ptr<Store>> open_store(std::string_view url);

}  // namespace baton

#endif  // BATON_STORE_DESCRIPTOR_H_
