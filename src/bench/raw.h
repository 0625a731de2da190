// bench/raw.h — a thin blocking hiredis connection for the benchmark's raw
// RESP paths (the raw-Redis baseline and the batond capacity workloads), and
// the capacity workloads themselves. Internal to bench/.
//
// Every blocking read has a socket timeout, so no call waits forever.
//
// Thread safety: one RawConn per thread.
#ifndef BATON_BENCH_RAW_H_
#define BATON_BENCH_RAW_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "bench/loadgen.h"

struct redisContext;

namespace baton::bench {

struct Endpoint {
  std::string host;
  int port = 0;
  std::string query;  // what follows '?', verbatim
};

// scheme://host:port[?query] (the scheme is ignored).
Result<Endpoint> parse_endpoint(std::string_view url);

struct RawReply {
  int type = 0;  // REDIS_REPLY_*
  std::string str;
  long long integer = 0;
  std::vector<RawReply> elements;
};

class RawConn {
 public:
  // `timeout` bounds the connect and every later blocking read or write.
  static Result<std::unique_ptr<RawConn>> connect(
      const Endpoint& ep, std::chrono::milliseconds timeout);
  ~RawConn();
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  // One request, one reply.
  Result<RawReply> call(const std::vector<std::string>& args);
  // Pipelining: queue requests, then read their replies in order (the
  // first read flushes the queue).
  Status append(const std::vector<std::string>& args);
  Status flush();
  Result<RawReply> read();
  // For an event loop: read what the socket has (it must be readable), then
  // take complete replies one by one.
  Status read_some();
  Result<std::optional<RawReply>> take_buffered();

  int fd() const;
  // Close with RST instead of FIN (no TIME_WAIT left behind).
  void set_abortive_close() { abortive_ = true; }

 private:
  explicit RawConn(redisContext* c) : c_(c) {}
  Error failure(const char* what) const;
  redisContext* c_;
  bool abortive_ = false;
};

// The capacity workloads (see loadgen.h).
Result<LoadResult> run_hold(const LoadOptions& o);
Result<LoadResult> run_waiters(const LoadOptions& o);

}  // namespace baton::bench

#endif  // BATON_BENCH_RAW_H_
