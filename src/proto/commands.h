// proto/commands.h — the batond command set, one codec for both sides: the
// baton:// store encodes requests and decodes replies, batond decodes
// requests and encodes replies, with these functions only.
// docs/protocol.md is the user-facing description of the same formats.
//
// Requests (RESP2 arrays of bulk strings; numbers in decimal):
//   LOCK.ACQUIRE name token ttl_ms [WAIT ms] [CAPACITY n] [LABEL s]
//                [REENTRANT key] [SHARED] [EPHEMERAL] [BRIEF] [QUEUED]
//   LOCK.EXTEND name token ttl_ms
//   LOCK.RELEASE name token
//   LOCK.DESCRIBE name
//   LOCK.LIST prefix limit
//   LOCK.WATCH prefix wait_ms
//   LOCK.HISTORY name
//   LOCK.ACQUIRE_SOME|LOCK.ACQUIRE_ALL token ttl_ms wait_ms capacity label
//                name...
//   COUNTER.GET name | COUNTER.ADD name delta | COUNTER.TAKE name n
// Decoding checks what the wire form itself bounds — arity, integers, the
// owner token, the TTL, WAIT/CAPACITY/limit ranges, known options — in the
// words batond has always answered with (invalid_argument). The contract's
// checks of the decoded values (names, labels, shared mode, ...) are
// core::validate's: batond runs them on every decoded request, as the
// client does before anything is sent.
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

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "baton/lease.h"
#include "core/request.h"
#include "proto/resp.h"

namespace baton::proto {

using std::chrono::milliseconds;

inline constexpr std::uint16_t kDefaultPort = 7420;

// --- Requests ----------------------------------------------------------------

// LOCK.ACQUIRE.
struct AcquireCommand {
  AcquireSpec spec;
  milliseconds wait{0};    // 0: answer at once (a try)
  bool ephemeral = false;  // the lease is bound to the connection
  bool brief = false;      // an immediate grant of what was asked: brief form
  bool queued = false;     // a request that queues: `+queued <place>` first
};
// LOCK.EXTEND (ttl) and LOCK.RELEASE (no ttl).
struct LeaseCommand {
  std::string name;
  OwnerToken token;
  milliseconds ttl{0};
};
// LOCK.LIST.
struct ListCommand {
  std::string prefix;
  std::size_t limit = 0;
};
// LOCK.WATCH: the connection's change feed over `prefix` (docs/protocol.md).
struct WatchCommand {
  std::string prefix;
  milliseconds wait{0};  // 0: answer at once (arms the feed)
};
// LOCK.ACQUIRE_SOME / LOCK.ACQUIRE_ALL (spec.all_or_nothing).
struct MultiCommand {
  MultiSpec spec;
  milliseconds wait{0};
};
// COUNTER.*.
struct CounterCommand {
  enum class Op { get, add, take };
  Op op = Op::get;
  std::string name;
  std::int64_t n = 0;  // add: the delta; take: how many
};

// Encoders (the baton:// store). WAIT is sent only for a wait > 0.
// `queued`: sent only with a wait > 0 (QUEUED).
void encode_acquire(RespWriter& w, const AcquireSpec& spec, milliseconds wait,
                    bool brief, bool queued = false);
void encode_extend(RespWriter& w, std::string_view name,
                   const OwnerToken& token, milliseconds ttl);
void encode_release(RespWriter& w, std::string_view name,
                    const OwnerToken& token);
void encode_describe(RespWriter& w, std::string_view name);
void encode_list(RespWriter& w, std::string_view prefix, std::size_t limit);
void encode_watch(RespWriter& w, std::string_view prefix, milliseconds wait);
void encode_history(RespWriter& w, std::string_view name);
void encode_multi(RespWriter& w, const MultiSpec& spec, milliseconds wait);
void encode_counter(RespWriter& w, CounterCommand::Op op, std::string_view name,
                    std::int64_t n = 0);

// Decoders (batond): `req` is the whole request, command name first (any
// case). invalid_argument naming the problem.
Result<AcquireCommand> decode_acquire(const Request& req);
Result<LeaseCommand> decode_extend(const Request& req);
Result<LeaseCommand> decode_release(const Request& req);
Result<std::string> decode_describe(const Request& req);
Result<ListCommand> decode_list(const Request& req);
Result<WatchCommand> decode_watch(const Request& req);
Result<std::string> decode_history(const Request& req);  // the lock name
Result<MultiCommand> decode_multi(const Request& req);
Result<CounterCommand> decode_counter(const Request& req);

// --- Replies -----------------------------------------------------------------

void write_grant(RespWriter& w, const core::Grant& g);
// The reply to `LOCK.ACQUIRE … BRIEF` when the grant is the lease the
// request asked for (its token, TTL, capacity and mode): the fields the
// client does not know, `*4 :fencing :valid_for_us :expires_at_ms :holds`
// (docs/protocol.md).
void write_brief_grant(RespWriter& w, const core::Grant& g);
// Whether `g` may be answered briefly to a request for `asked`.
bool brief_fits(const core::Grant& g, const AcquireSpec& asked);
void write_not_acquired(RespWriter& w, const Error& e);
void write_error(RespWriter& w, const Error& e);  // -code message
void write_holder(RespWriter& w, const HolderInfo& h);
void write_lock_info(RespWriter& w, const LockInfo& info);
void write_release(RespWriter& w, const core::ReleaseResult& r);
// The interim reply to `LOCK.ACQUIRE … WAIT ms QUEUED` that queued:
// `+queued <place>` (1-based among the waiting requests).
void write_queued(RespWriter& w, std::size_t position);

// Client side. Every decoder maps an error reply (or a not_acquired array)
// to the matching Error, and anything unexpected to `internal`.
Error error_from_reply(const Reply& r);
bool is_failure(const Reply& r);  // error reply or not_acquired array
Result<core::Grant> read_grant(const Reply& r);
// A reply to `LOCK.ACQUIRE … BRIEF`: the brief form, completed from
// `asked` (the request's name, token, TTL, capacity and mode), or the full
// one (a reentrant join, a grant after a wait).
Result<core::Grant> read_grant(const Reply& r, const AcquireSpec& asked);
Result<std::vector<core::Grant>> read_grants(const Reply& r);
Result<LockInfo> read_lock_info(const Reply& r);
Result<std::vector<LockInfo>> read_lock_infos(const Reply& r);
Result<core::ReleaseResult> read_release(const Reply& r);
Result<std::int64_t> read_integer(const Reply& r);
// Whether `r` is the interim `+queued <place>`; sets *position (0 if the
// place does not parse).
bool read_queued(const Reply& r, std::uint32_t* position);

}  // namespace baton::proto

#endif  // BATON_PROTO_COMMANDS_H_
