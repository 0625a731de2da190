// tests/server/raw_resp.h — a raw RESP connection to batond for tests that
// need to control the socket itself (pipelining without reading, closing
// with a request in flight).
#ifndef BATON_TESTS_SERVER_RAW_RESP_H_
#define BATON_TESTS_SERVER_RAW_RESP_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "proto/resp.h"

namespace baton::testing {

class Raw {
 public:
  explicit Raw(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      throw std::runtime_error("connect");
    }
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Raw() { close(); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  int fd() const { return fd_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send_raw(const std::string& s) {
    ASSERT_EQ(::send(fd_, s.data(), s.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(s.size()));
  }
  void send(const std::vector<std::string>& args) {
    send_raw(proto::encode_command(args));
  }
  // nullopt on EOF/timeout.
  std::optional<proto::Reply> read() {
    for (;;) {
      proto::Reply r;
      auto got = parser_.next(&r);
      if (got && *got) return r;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return std::nullopt;
      (void)parser_.feed(buf, static_cast<std::size_t>(n));
    }
  }
  proto::Reply call(const std::vector<std::string>& args) {
    send(args);
    auto r = read();
    if (!r) throw std::runtime_error("no reply");
    return *r;
  }

 private:
  int fd_ = -1;
  proto::ReplyParser parser_;
};

// An INFO field as an integer (-1 if absent).
inline std::int64_t info_field(Raw& c, const std::string& key) {
  auto r = c.call({"INFO"});
  auto at = r.str.find("\n" + key + ":");
  if (at == std::string::npos) return -1;
  return std::stoll(r.str.substr(at + key.size() + 2));
}

}  // namespace baton::testing

#endif  // BATON_TESTS_SERVER_RAW_RESP_H_
