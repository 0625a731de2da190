// stores/zookeeper/zk_open.cc — the zookeeper:// descriptor, its options
// (credentials and the refusal of TLS included), opening a store, and the
// check of the ACL of the nodes it finds (docs/stores/zookeeper.md,
// "Security").
#include <zookeeper/zookeeper.h>

#include <algorithm>

#include "stores/zookeeper/zk_store.h"
#include "stores/zookeeper/zookeeper_store.h"

namespace baton::store {
namespace zk {
namespace {

// Where a password is looked for last (store_password()).
constexpr const char* kPasswordEnv = "BATON_ZK_PASSWORD";

Error bad(const StoreUrl& url, const std::string& what) {
  return Error(Errc::invalid_argument,
               "store URL \"" + url.safe + "\": " + what);
}

bool valid_root_component(std::string_view c) {
  if (c.empty() || c == "." || c == ".." || c == "zookeeper") return false;
  return std::all_of(c.begin(), c.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.';
  });
}

// The credentials: user (URL userinfo or `user`), password (option, URL,
// password_file, $BATON_ZK_PASSWORD) and admin ids. A password without a
// user is refused (it would be silently unused); so is a user without one.
Status parse_credentials(const StoreUrl& url, ZkOptions* o) {
  std::string user = url.user;
  const std::string& opt_user = url.options.text("user");
  if (!opt_user.empty()) {
    if (!user.empty() && user != opt_user) {
      return bad(url, "user \"" + opt_user + "\" differs from the URL's \"" +
                          user + "\"");
    }
    user = opt_user;
  }
  const bool password_given = !url.password.empty() ||
                              url.options.given("password") ||
                              url.options.given("password_file");
  std::vector<std::string> admins;
  const std::string& admin = url.options.text("admin_id");
  for (std::size_t start = 0; start < admin.size();) {
    const std::size_t comma = std::min(admin.find(',', start), admin.size());
    const std::string id = admin.substr(start, comma - start);
    if (!valid_digest_id(id)) {
      return bad(url, "admin_id \"" + id +
                          "\" is not a digest id user:base64(sha1(user:"
                          "password)) (28 characters after the ':')");
    }
    admins.push_back(id);
    start = comma + 1;
  }
  if (user.empty()) {
    o->conn.acl = store_acl("", "", {});  // open, as without credentials
    if (password_given) {
      return bad(url,
                 "a password without a user: give the digest user (user@ in "
                 "the URL, or option user)");
    }
    if (!admins.empty()) {
      return bad(url, "admin_id needs credentials (user and password)");
    }
    return {};
  }
  if (user.find(':') != std::string::npos) {
    return bad(url, "user \"" + user +
                        "\" contains ':' (ZooKeeper's digest "
                        "scheme splits user and password there)");
  }
  auto password = store_password(url, kPasswordEnv);
  if (!password.ok()) return std::move(password).error();
  if (password->empty()) {
    return bad(url, "no password for user \"" + user +
                        "\": give it in the URL, as option password or "
                        "password_file, or in $" +
                        std::string(kPasswordEnv));
  }
  o->user = user;
  o->own_id = digest_id(user, *password);
  o->conn.digest = user + ":" + *password;
  o->conn.acl = store_acl(user, *password, admins);
  return {};
}

// The URL's options, checked beyond their types (ranges, the chroot).
Result<ZkOptions> parse_options(const StoreUrl& url) {
  ZkOptions o;
  o.url = url.safe;
  for (const char* key : {"tls", "ca", "cert", "key"}) {
    const bool on = std::string_view(key) == "tls" ? url.options.flag(key)
                                                   : url.options.given(key);
    if (!on) continue;
    return bad(
        url, std::string(key) +
                 ": zookeeper:// has no TLS: the ZooKeeper C client it is "
                 "built with (libzookeeper-mt 3.8.0, Debian) has no OpenSSL "
                 "support (no zookeeper_init_ssl). Reach a TLS port "
                 "(secureClientPort) through a local TLS tunnel such as "
                 "stunnel or ghostunnel, or use a private network "
                 "(WireGuard, IPsec); docs/stores/zookeeper.md, \"Security\"");
  }
  if (Status st = parse_credentials(url, &o); !st.ok()) return st.error();
  std::string hosts;
  for (const auto& hp : url.hosts) {
    if (hp.host.empty()) return bad(url, "a host of the list is empty");
    if (!hosts.empty()) hosts += ",";
    const bool v6 = hp.host.find(':') != std::string::npos;
    hosts += v6 ? "[" + hp.host + "]" : hp.host;
    hosts += ":" + std::to_string(hp.port == 0 ? 2181 : hp.port);
  }
  o.conn.hosts = hosts;
  std::string root = url.path.empty() ? "baton" : url.path;
  while (!root.empty() && root.back() == '/') root.pop_back();
  o.root.clear();
  std::size_t start = 0;
  while (start <= root.size()) {
    const auto slash = root.find('/', start);
    const std::string part = root.substr(
        start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!valid_root_component(part)) {
      return bad(url, "chroot \"/" + root +
                          "\" must be /-separated names of [A-Za-z0-9_.-] "
                          "(not \".\", \"..\" or \"zookeeper\")");
    }
    o.root += "/" + part;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  auto in_range = [&](const char* key, milliseconds lo, milliseconds hi,
                      milliseconds* out) -> Status {
    *out = url.options.duration(key);
    if (*out < lo || *out > hi) {
      return bad(url, std::string(key) + " " + url.options.text(key) +
                          " is out of range (" + std::to_string(lo.count()) +
                          "ms .. " + std::to_string(hi.count()) + "ms)");
    }
    return {};
  };
  if (Status st = in_range("session_timeout", milliseconds(1000),
                           milliseconds(600000), &o.conn.session_timeout);
      !st.ok()) {
    return st.error();
  }
  if (Status st = in_range("request_timeout", milliseconds(10),
                           milliseconds(600000), &o.conn.request_timeout);
      !st.ok()) {
    return st.error();
  }
  o.conn.where = hosts + o.root;
  return o;
}

Result<std::unique_ptr<baton::Store>> open_zookeeper(const StoreUrl& url) {
  auto options = parse_options(url);
  if (!options.ok()) return std::move(options).error();
  auto conn = Conn::open(options->conn);
  if (!conn.ok() && conn.error().code() == Errc::permission_denied) {
    // Refused credentials: named by the URL (password masked), which
    // names the store and its servers, instead of the servers alone.
    std::string msg = conn.error().message();
    const std::string servers = "zookeeper " + options->conn.where + ": ";
    if (msg.starts_with(servers)) msg.erase(0, servers.size());
    return Error(Errc::permission_denied, url.safe + ": " + msg);
  }
  if (!conn.ok()) return std::move(conn).error();
  auto store = std::make_unique<ZkStore>(std::move(*options), std::move(*conn));
  if (Status st = store->prepare(CallContext()); !st.ok()) return st.error();
  return std::unique_ptr<baton::Store>(std::move(store));
}

}  // namespace

Error ZkStore::acl_refusal(const std::string& path, int rc,
                           const std::vector<AclEntry>& found) const {
  const bool secured = !options_.user.empty();
  std::string why = options_.url + ": refused node " + path + ": ";
  if (rc == ZNOAUTH) {
    why += secured ? "its ACL cannot be read with these credentials "
                     "(not authenticated: a wrong password for user \"" +
                         options_.user + "\", or nodes of another identity)"
                   : "its ACL cannot be read without credentials (nodes "
                     "protected by a digest identity: give its user and "
                     "password)";
  } else {
    why += "its ACL is " + format_acl(found, options_.own_id);
  }
  why += "; this store makes its nodes with " +
         format_acl(options_.conn.acl, options_.own_id) +
         ". A node with another ACL is not adopted: give it that ACL "
         "(zkCli setAcl) or delete it (docs/stores/zookeeper.md, "
         "\"Security\")";
  return Error(Errc::permission_denied, why);
}

Status ZkStore::check_acl(const std::string& path, const CallContext& ctx) {
  if (options_.user.empty()) return {};
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (acl_checked_.count(path) != 0) return {};
  }
  std::vector<int> rcs;
  std::vector<std::vector<AclEntry>> acls;
  const int rc = conn_->get_acls({path}, &rcs, &acls, ctx);
  if (rc != ZOK) return err(rc, "read the ACL of " + path);
  if (rcs[0] == ZOK && !same_acl(acls[0], options_.conn.acl)) {
    return acl_refusal(path, rcs[0], acls[0]);
  }
  if (rcs[0] == ZNOAUTH) return acl_refusal(path, rcs[0], {});
  if (rcs[0] != ZOK && rcs[0] != ZNONODE) {
    return err(rcs[0], "read the ACL of " + path);
  }
  // Missing: this store's create will make it, with its ACL.
  std::lock_guard<std::mutex> lk(mu_);
  if (acl_checked_.size() >= 100000) acl_checked_.clear();
  acl_checked_.insert(path);
  return {};
}

Status ZkStore::prepare(const CallContext& ctx) {
  // The root's nodes, read in one pipelined batch, before anything is
  // written; the missing ones are made. With credentials each that exists
  // must carry exactly the ACL this store would give it. Without, any ACL
  // the session can read is used as before credentials existed (an
  // operator's ip: ACL, say); one it cannot read belongs to a digest
  // identity, and every request would be refused: refused at once.
  // Ancestors of a multi-level root are only made if missing: a node can
  // only be deleted when empty, and the root never is.
  const bool secured = !options_.user.empty();
  const std::vector<std::string> paths = {
      options_.root, options_.root + "/locks", options_.root + "/counters",
      options_.root + "/clock"};
  std::vector<int> rcs;
  std::vector<std::vector<AclEntry>> acls;
  const int rc = conn_->get_acls(paths, &rcs, &acls, ctx);
  if (rc != ZOK) return err(rc, "read the ACL of " + options_.root);
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (rcs[i] == ZNONODE) {
      missing.push_back(paths[i]);
    } else if (rcs[i] == ZNOAUTH || (secured && rcs[i] == ZOK &&
                                     !same_acl(acls[i], options_.conn.acl))) {
      return acl_refusal(paths[i], rcs[i], acls[i]);
    } else if (rcs[i] != ZOK) {
      return err(rcs[i], "read the ACL of " + paths[i]);
    }
  }
  for (const auto& path : missing) {
    if (Status s = ensure_path(path, ctx); !s.ok()) return s;
  }
  std::lock_guard<std::mutex> lk(mu_);
  acl_checked_.insert(paths.begin(), paths.end());
  return {};
}

}  // namespace zk

const StoreDescriptor& zookeeper_descriptor() {
  static const StoreDescriptor d = [] {
    StoreDescriptor z;
    z.name = "zookeeper";
    z.schemes = {"zookeeper", "zk"};
    z.summary =
        "ZooKeeper 3.5+: one ephemeral sequential node per request, each "
        "waiter watching the node ahead";
    z.url_form =
        "zookeeper://[user[:password]@]host[:port][,host[:port]...]"
        "[/chroot]";
    z.default_port = 2181;
    OptionSpec request_timeout = request_timeout_option("5s");
    request_timeout.help =
        "longest wait for the answer to one ZooKeeper request (10ms .. 10m)";
    request_timeout.aliases = {"timeout"};
    z.options = {
        request_timeout,
        duration_option("session_timeout", "10s",
                        "the ZooKeeper session's timeout (1s .. 10m; the "
                        "server clamps it): bounds every lease, and how "
                        "long a dead client's requests stay"),
        text_option("user", "",
                    "digest user (or user@ in the URL): every node is then "
                    "made with an ACL for this identity only"),
    };
    for (auto& o : password_options(zk::kPasswordEnv)) {
      z.options.push_back(std::move(o));
    }
    z.options.push_back(text_option(
        "admin_id", "",
        "digest ids user:base64(sha1(user:password)), comma-separated, "
        "also given every permission on every node"));
    z.options.push_back(flag_option(
        "tls", "0", "refused: this build's ZooKeeper C client has no TLS"));
    for (const char* key : {"ca", "cert", "key"}) {
      z.options.push_back(text_option(key, "", "refused, as tls"));
    }
    z.open = zk::open_zookeeper;
    return z;
  }();
  return d;
}

}  // namespace baton::store
