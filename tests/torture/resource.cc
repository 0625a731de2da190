// tests/torture/resource.cc — see resource.h.
#include "resource.h"

#include <libpq-fe.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>

namespace baton::torture {

GuardedResource::GuardedResource(std::string socket_path, bool fencing,
                                 std::string pg_conninfo)
    : path_(std::move(socket_path)),
      fencing_(fencing),
      pg_conninfo_(std::move(pg_conninfo)) {}

GuardedResource::~GuardedResource() {
  stop();
  if (pg_ != nullptr) PQfinish(static_cast<PGconn*>(pg_));
}

char GuardedResource::ask_sql(const Write& w) {
  auto* c = static_cast<PGconn*>(pg_);
  if (c == nullptr || PQstatus(c) != CONNECTION_OK) {
    if (c != nullptr) PQfinish(c);
    c = PQconnectdb((pg_conninfo_ + " connect_timeout=1").c_str());
    pg_ = c;
    if (PQstatus(c) != CONNECTION_OK) return '?';
  }
  const std::string token = std::to_string(w.fencing);
  const char* params[2] = {w.lock.c_str(), token.c_str()};
  // Bounded (300 ms): a frozen server (pause_store) must not stall the
  // resource, and with it every worker's write. No answer: '?', and the
  // connection is dropped.
  if (PQsendQueryParams(c, "SELECT baton.fenced_write($1, $2::bigint)", 2,
                        nullptr, params, nullptr, nullptr, 0) == 0) {
    return '?';
  }
  const std::int64_t until = real_us() + 300'000;
  while (PQisBusy(c) != 0) {
    const std::int64_t left = until - real_us();
    pollfd p{PQsocket(c), POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left / 1000) + 1) < 0 ||
        PQconsumeInput(c) == 0) {
      PQfinish(c);
      pg_ = nullptr;
      return '?';
    }
  }
  char out = '?';
  for (PGresult* r = PQgetResult(c); r != nullptr; r = PQgetResult(c)) {
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
      out = PQgetvalue(r, 0, 0)[0] == 't' ? 'A' : 'R';
    }
    PQclear(r);
  }
  return out;
}

bool GuardedResource::start() {
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return false;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path_.c_str(), sizeof sa.sun_path - 1);
  ::unlink(path_.c_str());
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(listen_fd_, 128) != 0) {
    return false;
  }
  acceptor_ = std::thread([this] { accept_loop(); });
  return true;
}

void GuardedResource::stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> conns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns.swap(conns_);
  }
  for (auto& t : conns) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  ::unlink(path_.c_str());
}

std::vector<Write> GuardedResource::writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_;
}

void GuardedResource::accept_loop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    conns_.emplace_back([this, fd] { serve(fd); });
  }
}

void GuardedResource::serve(int fd) {
  std::string buf;
  char chunk[512];
  while (!stopping_) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n <= 0) break;
    buf.append(chunk, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      const char verdict = judge(buf.substr(0, nl));
      buf.erase(0, nl + 1);
      const char reply[2] = {verdict, '\n'};
      // MSG_NOSIGNAL: a worker killed -9 must not SIGPIPE the orchestrator.
      if (::send(fd, reply, 2, MSG_NOSIGNAL) != 2) break;
    }
  }
  ::close(fd);
}

char GuardedResource::judge(const std::string& line) {
  std::istringstream in(line);
  std::string verb;
  Write w;
  in >> verb >> w.worker >> w.seq >> w.lock >> w.fencing;
  if ((verb != "W" && verb != "E" && verb != "D") || !in) return 'E';
  std::lock_guard<std::mutex> lock(mu_);
  auto& r = res_[w.lock];
  if (!r) r = std::make_unique<FencedResource>();
  ReadWrite& rw = rw_[w.lock];
  if (verb == "E") {  // the end of a write: not recorded
    if (rw.writing && rw.write.worker == w.worker && rw.write.seq == w.seq) {
      rw.writing = false;
    }
    return 'A';
  }
  if (verb == "D") {
    w.verb = 'D';
    w.accepted = w.fencing >= r->highest() || !fencing_;
    if (w.accepted) {
      rw.highest_read = std::max(rw.highest_read, w.fencing);
      rw.read_tokens.push_back(w.fencing);
      if (rw.writing) {
        w.writer = rw.write.worker;
        w.writer_token = rw.write.fencing;
        w.write_begun_us = rw.write.at_us;
      }
    }
    w.at_us = real_us();
    writes_.push_back(w);
    return w.accepted ? 'A' : 'R';
  }
  for (std::uint64_t t : rw.read_tokens) w.shared_writer |= t == w.fencing;
  w.accepted =
      (w.fencing >= rw.highest_read && r->try_write(w.fencing)) || !fencing_;
  if (!pg_conninfo_.empty() && fencing_) w.sql = ask_sql(w);
  w.at_us = real_us();
  if (w.accepted) {
    // A newer accepted write ends any older one still open (its writer
    // died or was cut off before its "E").
    rw.writing = true;
    rw.write = w;
  }
  writes_.push_back(w);
  return w.accepted ? 'A' : 'R';
}

}  // namespace baton::torture
