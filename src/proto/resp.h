// proto/resp.h — RESP2 framing shared by batond and the baton:// store.
//
// RespWriter appends RESP2 values to a std::string. RequestParser splits a
// byte stream into requests (arrays of bulk strings, what redis-cli and every
// Redis client send) and enforces limits *before* anything is allocated for a
// frame: at most `max_request_bytes` per request and `max_args` arguments.
// The frame is then decoded by hiredis' redisReader. ReplyParser decodes
// server replies (any RESP2 value) with hiredis on the client side, after
// checking every header against ReplyLimits.
//
// A parser error is final: the caller replies with the error and closes the
// connection (the stream position is lost).
//
// Thread safety: none; one object per connection.
#ifndef BATON_PROTO_RESP_H_
#define BATON_PROTO_RESP_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/error.h"

namespace baton::proto {

struct ProtoLimits {
  // Largest request frame (headers + payload) accepted; default 1 MiB.
  std::size_t max_request_bytes = 1 << 20;
  // Most arguments in one request (command name included).
  std::size_t max_args = 2048;
};

class RespWriter {
 public:
  explicit RespWriter(std::string& out) : out_(out) {}
  void simple(std::string_view s);  // +OK
  void error(std::string_view s);   // -code message (CR/LF replaced)
  void integer(std::int64_t v);     // :42
  void bulk(std::string_view s);    // $3 abc
  void nil();                       // $-1
  void array(std::size_t n);        // *n (then n values)

 private:
  std::string& out_;
};

// One command as a RESP array of bulk strings.
std::string encode_command(const std::vector<std::string>& args);

using Request = std::vector<std::string>;

class RequestParser {
 public:
  enum class State { need_more, request, error };
  explicit RequestParser(ProtoLimits limits = {});
  void feed(const char* data, std::size_t size);
  // request: *out holds the next request. error: *message says why (starts
  // with "invalid_argument "), and the connection must be closed.
  State next(Request* out, std::string* message);
  std::size_t buffered() const { return buf_.size() - pos_; }

 private:
  ProtoLimits limits_;
  std::string buf_;
  std::size_t pos_ = 0;
  // (offset in buf_, length) of each argument of the frame being read.
  std::vector<std::pair<std::size_t, std::size_t>> spans_;
};

struct Reply {
  enum class Type { string, array, integer, nil, status, error };
  Type type = Type::nil;
  std::string str;  // string, status, error
  std::int64_t integer = 0;
  std::vector<Reply> elements;  // array
};

// Bounds on one reply (hiredis 0.14 itself has none: an array header of
// two billion elements would make it allocate 16 GB). Checked on every
// header as bytes arrive, before hiredis sees them.
struct ReplyLimits {
  std::size_t max_array_elements = 1 << 20;  // per array
  std::size_t max_total_elements = 1 << 22;  // per reply, nested included
  std::size_t max_bulk_bytes = 64u << 20;    // per bulk string
  std::size_t max_reply_bytes = 256u << 20;  // per reply, framing included
  std::size_t max_depth = 7;                 // nested arrays
  std::size_t max_line_bytes = 64u << 10;    // a status/error/header line
};

class ReplyParser {
 public:
  ReplyParser();
  explicit ReplyParser(ReplyLimits limits);
  ~ReplyParser();
  ReplyParser(const ReplyParser&) = delete;
  ReplyParser& operator=(const ReplyParser&) = delete;
  // invalid_argument on a malformed stream or a reply over the limits
  // (final: the connection must be dropped).
  Status feed(const char* data, std::size_t size);
  // true and *out set when a complete reply is available.
  Result<bool> next(Reply* out);

 private:
  Status scan(const char* data, std::size_t size);
  Status header(std::string_view line);
  void item_done();

  void* reader_;  // redisReader
  ReplyLimits limits_;
  std::string error_;               // set once the stream is refused
  std::string line_;                // header line being assembled
  std::uint64_t skip_ = 0;          // bulk payload (+ CRLF) still to pass
  std::vector<std::int64_t> open_;  // elements left in each open array
  std::uint64_t reply_elements_ = 0, reply_bytes_ = 0;
};

}  // namespace baton::proto

#endif  // BATON_PROTO_RESP_H_
