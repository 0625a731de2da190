// libFuzzer target for what batond does with untrusted bytes (clang only):
// its request parser, then the LOCK.* / COUNTER.* decoders and the
// validation every decoded request goes through. -fsanitize=fuzzer,address;
// see docs/server.md for the command.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/request.h"
#include "core/validate.h"
#include "proto/commands.h"
#include "proto/resp.h"

namespace {

// What batond's command layer does with a request before the table sees
// it: decode (whatever the command name) and check.
void decode_all(const baton::proto::Request& req) {
  namespace proto = baton::proto;
  if (req.empty()) return;
  if (auto c = proto::decode_acquire(req)) {
    (void)baton::core::validate(c->spec, c->wait);
  }
  if (auto c = proto::decode_extend(req)) {
    (void)baton::core::validate_lease_call(c->name, c->token, c->ttl);
  }
  (void)proto::decode_release(req);
  (void)proto::decode_describe(req);
  if (auto c = proto::decode_list(req)) {
    (void)baton::core::validate_prefix(c->prefix);
  }
  if (auto c = proto::decode_multi(req)) {
    (void)baton::core::validate(c->spec, c->wait);
  }
  if (auto c = proto::decode_counter(req)) {
    (void)baton::core::validate_name(c->name, "counter name");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  // Small limits so the fuzzer reaches them.
  baton::proto::RequestParser parser({4096, 64});
  // Feed in two pieces to exercise partial frames.
  std::size_t half = size / 2;
  parser.feed(reinterpret_cast<const char*>(data), half);
  baton::proto::Request req;
  std::string msg;
  while (parser.next(&req, &msg) ==
         baton::proto::RequestParser::State::request) {
    decode_all(req);
  }
  parser.feed(reinterpret_cast<const char*>(data) + half, size - half);
  while (parser.next(&req, &msg) ==
         baton::proto::RequestParser::State::request) {
    decode_all(req);
  }
  return 0;
}
