#include "proto/resp.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>

namespace baton::proto {

void RespWriter::simple(std::string_view s) {
  out_ += '+';
  for (char c : s) out_ += (c == '\r' || c == '\n') ? ' ' : c;
  out_ += "\r\n";
}
void RespWriter::error(std::string_view s) {
  out_ += '-';
  for (char c : s) out_ += (c == '\r' || c == '\n') ? ' ' : c;
  out_ += "\r\n";
}
void RespWriter::integer(std::int64_t v) {
  out_ += ':';
  out_ += std::to_string(v);
  out_ += "\r\n";
}
void RespWriter::bulk(std::string_view s) {
  out_ += '$';
  out_ += std::to_string(s.size());
  out_ += "\r\n";
  out_.append(s);
  out_ += "\r\n";
}
void RespWriter::nil() { out_ += "$-1\r\n"; }
void RespWriter::array(std::size_t n) {
  out_ += '*';
  out_ += std::to_string(n);
  out_ += "\r\n";
}

std::string encode_command(const std::vector<std::string>& args) {
  std::string out;
  RespWriter w(out);
  w.array(args.size());
  for (const auto& a : args) w.bulk(a);
  return out;
}

RequestParser::RequestParser(ProtoLimits limits) : limits_(limits) {}

void RequestParser::feed(const char* data, std::size_t size) {
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > 64 * 1024 && pos_ > buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(data, size);
}

namespace {

enum class Line { ok, need_more, bad };

// Reads "<prefix><digits>\r\n" at `at`; *value the integer, *next after CRLF.
Line read_header(std::string_view buf, std::size_t at, char prefix,
                 long long* value, std::size_t* next) {
  if (at >= buf.size()) return Line::need_more;
  if (buf[at] != prefix) return Line::bad;
  std::size_t limit = std::min(buf.size(), at + 24);
  std::size_t cr = buf.find('\r', at + 1);
  if (cr == std::string_view::npos || cr >= limit) {
    return buf.size() >= at + 24 ? Line::bad : Line::need_more;
  }
  if (cr + 1 >= buf.size()) return Line::need_more;
  if (buf[cr + 1] != '\n') return Line::bad;
  const char* first = buf.data() + at + 1;
  const char* last = buf.data() + cr;
  if (first == last) return Line::bad;
  auto [p, ec] = std::from_chars(first, last, *value);
  if (ec != std::errc() || p != last) return Line::bad;
  *next = cr + 2;
  return Line::ok;
}

std::string describe_byte(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", u);
  return hex;
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};

}  // namespace

RequestParser::State RequestParser::next(Request* out, std::string* message) {
  std::string_view b(buf_);
  if (pos_ >= b.size()) return State::need_more;
  if (b[pos_] != '*') {
    *message =
        "invalid_argument protocol error: expected '*' (a RESP array "
        "of bulk strings), got " +
        describe_byte(b[pos_]);
    return State::error;
  }
  long long count = 0;
  std::size_t at = 0;
  Line l = read_header(b, pos_, '*', &count, &at);
  if (l == Line::need_more) return State::need_more;
  if (l == Line::bad) {
    *message = "invalid_argument protocol error: bad array header";
    return State::error;
  }
  if (count < 1 || static_cast<unsigned long long>(count) > limits_.max_args) {
    *message = "invalid_argument protocol error: request has " +
               std::to_string(count) + " arguments; the limit is 1.." +
               std::to_string(limits_.max_args);
    return State::error;
  }
  spans_.clear();
  for (long long i = 0; i < count; ++i) {
    long long len = 0;
    l = read_header(b, at, '$', &len, &at);
    if (l == Line::need_more) {
      if (at - pos_ > limits_.max_request_bytes) break;
      return State::need_more;
    }
    if (l == Line::bad) {
      *message =
          "invalid_argument protocol error: expected a bulk string "
          "header for argument " +
          std::to_string(i + 1);
      return State::error;
    }
    if (len < 0) {
      *message = "invalid_argument protocol error: argument " +
                 std::to_string(i + 1) + " has bulk length " +
                 std::to_string(len) +
                 "; a negative or null bulk length is not allowed in a "
                 "request";
      return State::error;
    }
    if (static_cast<unsigned long long>(len) > limits_.max_request_bytes) {
      at = std::string_view::npos;
      break;
    }
    spans_.emplace_back(at, static_cast<std::size_t>(len));
    at += static_cast<std::size_t>(len) + 2;
    if (at - pos_ > limits_.max_request_bytes) break;
    if (at <= b.size() && (b[at - 2] != '\r' || b[at - 1] != '\n')) {
      *message = "invalid_argument protocol error: bulk string " +
                 std::to_string(i + 1) + " is not followed by CRLF";
      return State::error;
    }
  }
  if (at == std::string_view::npos || at - pos_ > limits_.max_request_bytes) {
    *message = "invalid_argument request is over the " +
               std::to_string(limits_.max_request_bytes) + "-byte limit";
    return State::error;
  }
  if (at > b.size()) return State::need_more;
  // The frame [pos_, at) is complete and within limits, and the loop above
  // checked every header and CRLF of it: the arguments are the spans it
  // found. (Decoding the frame again with a hiredis reader cost about a
  // dozen allocations per request: most of batond's malloc time under
  // pipelined load, docs/bench/batond.md.)
  out->clear();
  out->reserve(spans_.size());
  for (const auto& [off, len] : spans_) out->emplace_back(b.substr(off, len));
  pos_ = at;
  return State::request;
}

// --- ReplyParser ----------------------------------------------------------

ReplyParser::ReplyParser() : ReplyParser(ReplyLimits{}) {}
ReplyParser::ReplyParser(ReplyLimits limits)
    : reader_(redisReaderCreate()), limits_(limits) {}
ReplyParser::~ReplyParser() {
  redisReaderFree(static_cast<redisReader*>(reader_));
}

Status ReplyParser::feed(const char* data, std::size_t size) {
  if (Status s = scan(data, size); !s.ok()) return s;
  if (redisReaderFeed(static_cast<redisReader*>(reader_), data, size) !=
      REDIS_OK) {
    return Error(Errc::invalid_argument, "malformed reply stream");
  }
  return {};
}

// Follows the RESP2 framing of the stream (header lines, bulk payloads,
// open arrays) without building anything, so limits are enforced before
// hiredis allocates for a header.
Status ReplyParser::scan(const char* data, std::size_t size) {
  if (!error_.empty()) return Error(Errc::invalid_argument, error_);
  std::size_t i = 0;
  while (i < size) {
    if (skip_ > 0) {
      std::size_t n =
          static_cast<std::size_t>(std::min<std::uint64_t>(skip_, size - i));
      skip_ -= n;
      i += n;
      reply_bytes_ += n;
      if (skip_ == 0) item_done();
      continue;
    }
    const char* nl =
        static_cast<const char*>(std::memchr(data + i, '\n', size - i));
    std::size_t end =
        nl == nullptr ? size : static_cast<std::size_t>(nl - data) + 1;
    line_.append(data + i, end - i);
    reply_bytes_ += end - i;
    i = end;
    if (line_.size() > limits_.max_line_bytes) {
      error_ = "reply line longer than " +
               std::to_string(limits_.max_line_bytes) + " bytes";
    } else if (nl != nullptr) {
      if (Status s = header(line_); !s.ok()) error_ = s.error().message();
      line_.clear();
    }
    if (error_.empty() && reply_bytes_ > limits_.max_reply_bytes) {
      error_ = "reply larger than " + std::to_string(limits_.max_reply_bytes) +
               " bytes";
    }
    if (!error_.empty()) return Error(Errc::invalid_argument, error_);
  }
  return {};
}

Status ReplyParser::header(std::string_view line) {
  auto bad = [](std::string m) { return Error(Errc::invalid_argument, m); };
  if (line.size() < 3 || line[line.size() - 2] != '\r') {
    return bad("malformed reply: a line does not end in CRLF");
  }
  const char type = line[0];
  const std::string_view body = line.substr(1, line.size() - 3);
  if (type == '+' || type == '-' || type == ':') {
    item_done();
    return {};
  }
  if (type != '$' && type != '*') {
    return bad("malformed reply: unknown type byte " +
               std::to_string(static_cast<unsigned char>(type)));
  }
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(body.data(), body.data() + body.size(), n);
  if (ec != std::errc() || p != body.data() + body.size() || n < -1) {
    return bad("malformed reply: bad length in a " + std::string(1, type) +
               " header");
  }
  if (type == '$') {
    if (n > static_cast<std::int64_t>(limits_.max_bulk_bytes)) {
      return bad("reply bulk string of " + std::to_string(n) +
                 " bytes exceeds the limit of " +
                 std::to_string(limits_.max_bulk_bytes));
    }
    if (n < 0) {
      item_done();
    } else {
      skip_ = static_cast<std::uint64_t>(n) + 2;
    }
    return {};
  }
  if (n > static_cast<std::int64_t>(limits_.max_array_elements)) {
    return bad("reply array of " + std::to_string(n) +
               " elements exceeds the limit of " +
               std::to_string(limits_.max_array_elements));
  }
  if (n > 0) {
    reply_elements_ += static_cast<std::uint64_t>(n);
    if (reply_elements_ > limits_.max_total_elements) {
      return bad("reply of more than " +
                 std::to_string(limits_.max_total_elements) +
                 " elements in all exceeds the limit");
    }
    if (open_.size() >= limits_.max_depth) {
      return bad("reply nests arrays deeper than " +
                 std::to_string(limits_.max_depth));
    }
    open_.push_back(n);
  } else {
    item_done();
  }
  return {};
}

// One value finished: count it in its array; a top-level one ends a reply.
void ReplyParser::item_done() {
  while (!open_.empty()) {
    if (--open_.back() > 0) return;
    open_.pop_back();
  }
  reply_elements_ = 0;
  reply_bytes_ = 0;
}

namespace {
void convert(const redisReply* r, Reply* out) {
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out->type = Reply::Type::string;
      out->str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out->type = Reply::Type::status;
      out->str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out->type = Reply::Type::error;
      out->str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out->type = Reply::Type::integer;
      out->integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out->type = Reply::Type::array;
      out->elements.resize(r->elements);
      for (std::size_t i = 0; i < r->elements; ++i) {
        convert(r->element[i], &out->elements[i]);
      }
      break;
    default:
      out->type = Reply::Type::nil;
  }
}
}  // namespace

Result<bool> ReplyParser::next(Reply* out) {
  void* raw = nullptr;
  auto* reader = static_cast<redisReader*>(reader_);
  if (redisReaderGetReply(reader, &raw) != REDIS_OK) {
    return Error(Errc::invalid_argument,
                 std::string("malformed reply: ") + reader->errstr);
  }
  if (raw == nullptr) return false;
  std::unique_ptr<redisReply, ReplyDeleter> reply(
      static_cast<redisReply*>(raw));
  *out = Reply{};
  convert(reply.get(), out);
  return true;
}

}  // namespace baton::proto
