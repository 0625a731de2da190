// stores/baton/baton_store.h — the baton:// store: a client of batond.
//
//   baton://host:port[?password=...&timeout_ms=5000&pool=4]
//   baton://:password@host:port      (password in the userinfo also works)
//
// Each Store call is one batond command on a pooled RESP connection (plain
// blocking sockets; deadlines via SO_RCVTIMEO/SO_SNDTIMEO, so a call is one
// send and one recv). Replies are size-checked (proto::ReplyLimits): an
// oversize or malformed reply is `unavailable` and drops the connection. A
// blocking acquire holds one connection for its wait. Connect/IO failures and
// timeouts are `unavailable`: the client retries with the same owner token,
// which batond answers idempotently (docs/contract.md#rule-17). A connection
// that failed is dropped, never reused; new connections back off after failures
// (50 ms doubling to 1 s).
//
// Thread safety: safe for concurrent use (Store contract).
#ifndef BATON_STORES_BATON_BATON_STORE_H_
#define BATON_STORES_BATON_BATON_STORE_H_

#include <memory>

#include "baton/error.h"
#include "core/url.h"
#include "stores/store.h"

namespace baton::store {

Result<std::unique_ptr<Store>> open_baton_store(const core::Url& url);

}  // namespace baton::store

#endif  // BATON_STORES_BATON_BATON_STORE_H_
