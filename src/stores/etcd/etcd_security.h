// stores/etcd/etcd_security.h — the etcd:// store's TLS and authentication
// options, and the check every open makes (docs/stores/etcd.md,
// "Security").
//
// TLS is on for etcds:// and for etcd://...?tls=1; `ca`, `cert` and `key`
// are read (and checked to belong together) at open, and refused without
// TLS. A user comes from the URL's userinfo, its password from
// store_password() (option, userinfo, password_file, then
// $ETCDCTL_PASSWORD); without a user nothing is authenticated, unless etcd
// takes the client certificate's CN as the user (--client-cert-auth).
//
// At open the store reads its prefix once (logging in first, with a user).
// A refusal by etcd's auth layer refuses the open (permission_denied). A
// call that could not reach any member is looked into: each member is
// reached over TCP and a TLS handshake is made with the same files, so that
// an untrusted certificate, a host name the certificate does not name, a
// client certificate the server refuses, or TLS on the one side only are
// refused at open with the reason (gRPC itself only says "failed to connect
// to all addresses"). Members that are down do not stop the open: their
// calls say `unavailable` later, as before.
//
// Thread safety: functions of values; no shared state.
#ifndef BATON_STORES_ETCD_ETCD_SECURITY_H_
#define BATON_STORES_ETCD_ETCD_SECURITY_H_

#include <string>

#include "baton/error.h"
#include "baton/store_descriptor.h"
#include "stores/etcd/etcd_conn.h"

namespace baton::store::etcd {

// The environment variable a password is taken from last (etcdctl's).
inline constexpr const char* kPasswordEnv = "ETCDCTL_PASSWORD";

// The descriptor's options for TLS and authentication: tls, ca, cert, key,
// password, password_file, token_refresh.
std::vector<OptionSpec> security_options();

// Where the TLS files of a store are, for the check at open.
struct TlsFiles {
  bool on = false;
  std::string ca, cert, key;  // paths; ca empty: the system CAs
};

// Fills the TLS and login fields of `conn` from `url` (its PEM contents,
// its user and password) and `*files`; invalid_argument naming the URL
// (password masked) and the problem.
// invalid_argument: "store URL \"<safe URL>\": <what>".
Error bad_url(const StoreUrl& url, const std::string& what);

Status security_of(const StoreUrl& url, Conn::Options* conn, TlsFiles* files);

// The check at open (above): OK, or the refusal. `prefix` without "/".
Status check_at_open(Conn& conn, const std::string& prefix,
                     const TlsFiles& files);

}  // namespace baton::store::etcd

#endif  // BATON_STORES_ETCD_ETCD_SECURITY_H_
