// proto/commands.h — the batond command set: reply shapes shared by the
// server (encode) and the baton:// store (decode). docs/protocol.md is the
// user-facing description of the same formats.
//
// Reply shapes (RESP2):
//   grant         *19 "granted" "name" $ "token" $ "fencing" : "ttl_ms" :
//                     "holds" : "capacity" : "valid_for_us" : "expires_at_ms" :
//                     "shared" :
//   not acquired  *3  "not_acquired" $message *[holder...]
//   holder        *10 "label" $ "fencing" : "time_left_ms" : "holds" :
//                     "shared" :
//   waiter        *8  "label" $ "waited_ms" : "all_or_nothing" : "shared" :
//   lock info     *10 "name" $ "capacity" : "last_fencing" : "holders" *[..]
//                     "waiters" *[..]
//   release       *4  "was_held" : "holds_left" :
//   errors        -<errc_name> <message>   e.g. -lock_lost lock "a" ...
//
// Thread safety: pure functions.
#ifndef BATON_PROTO_COMMANDS_H_
#define BATON_PROTO_COMMANDS_H_

#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "baton/lease.h"
#include "core/request.h"
#include "proto/resp.h"

namespace baton::proto {

inline constexpr std::uint16_t kDefaultPort = 7420;

void write_grant(RespWriter& w, const core::Grant& g);
// The reply to `LOCK.ACQUIRE … BRIEF` when the grant is the lease the
// request asked for (its token, TTL, capacity and mode): the fields the
// client does not know, `*4 :fencing :valid_for_us :expires_at_ms :holds`
// (docs/protocol.md).
void write_brief_grant(RespWriter& w, const core::Grant& g);
// Whether `g` may be answered briefly to a request for `asked`.
bool brief_fits(const core::Grant& g, const core::Grant& asked);
void write_not_acquired(RespWriter& w, const Error& e);
void write_error(RespWriter& w, const Error& e);  // -code message
void write_holder(RespWriter& w, const HolderInfo& h);
void write_lock_info(RespWriter& w, const LockInfo& info);
void write_release(RespWriter& w, const core::ReleaseResult& r);

// Client side. Every decoder maps an error reply (or a not_acquired array)
// to the matching Error, and anything unexpected to `internal`.
Error error_from_reply(const Reply& r);
bool is_failure(const Reply& r);  // error reply or not_acquired array
Result<core::Grant> read_grant(const Reply& r);
// A reply to `LOCK.ACQUIRE … BRIEF`: the brief form, completed from
// `asked` (the request's name, token, TTL, capacity and mode), or the full
// one (a reentrant join, a grant after a wait).
Result<core::Grant> read_grant(const Reply& r, const core::Grant& asked);
Result<std::vector<core::Grant>> read_grants(const Reply& r);
Result<LockInfo> read_lock_info(const Reply& r);
Result<std::vector<LockInfo>> read_lock_infos(const Reply& r);
Result<core::ReleaseResult> read_release(const Reply& r);
Result<std::int64_t> read_integer(const Reply& r);

}  // namespace baton::proto

#endif  // BATON_PROTO_COMMANDS_H_
