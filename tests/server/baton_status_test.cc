// tests/server/baton_status_test.cc — the status page's data endpoints
// (/status.json, /events) against the conformance_baton binary's batond
// (baton_test_server.h: users admin, and jobs with read on "jobs/" only):
// credentials, per-user filtering, pushes only when what a stream shows
// changed, the stream limit, bad queries. The page itself is tested in a
// browser by status_page_test.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "baton/client.h"
#include "baton/lease.h"
#include "baton_test_server.h"
#include "direct_store.h"
#include "raw_resp.h"
#include "stores/baton/baton_store.h"

namespace baton::testing {
namespace {

using std::chrono::milliseconds;

std::string base64(const std::string& s) {
  return run("printf '%s' '" + s + "' | base64 -w0");
}
std::string creds(const std::string& user, const std::string& password) {
  return base64(user + ":" + password);
}

// An HTTP connection to the metrics listener; reads with a deadline.
class Http {
 public:
  Http(const std::string& target, const std::string& basic) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(test_server().metrics_port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      throw std::runtime_error("connect");
    }
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: x\r\n";
    if (!basic.empty()) req += "Authorization: Basic " + basic + "\r\n";
    req += "\r\n";
    (void)::send(fd_, req.data(), req.size(), MSG_NOSIGNAL);
  }
  ~Http() { ::close(fd_); }
  // Reads until `want` is in what was read (or the peer closes, or
  // `limit` passes); returns everything read so far.
  const std::string& read_until(const std::string& want, milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (got_.find(want) == std::string::npos) {
      auto left = std::chrono::duration_cast<milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char b[8192];
      ssize_t n = ::recv(fd_, b, sizeof b, 0);
      if (n <= 0) break;
      got_.append(b, static_cast<std::size_t>(n));
    }
    return got_;
  }
  std::string all(milliseconds limit = milliseconds(5000)) {
    return read_until("\x01never", limit);
  }
  // Reads until `n` events have come (or `limit` passes).
  std::size_t wait_events(std::size_t n, milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (events() < n && std::chrono::steady_clock::now() < until) {
      read_until("\x01never", milliseconds(20));
    }
    return events();
  }
  // Server-sent events received so far ("data: " lines).
  std::size_t events() const {
    std::size_t n = 0;
    for (auto at = got_.find("\ndata: "); at != std::string::npos;
         at = got_.find("\ndata: ", at + 1)) {
      ++n;
    }
    return n;
  }

 private:
  int fd_ = -1;
  std::string got_;
};

std::string get(const std::string& target, const std::string& basic) {
  return Http(target, basic).all();
}

std::unique_ptr<DirectStore> admin_store() {
  auto s = DirectStore::open(baton_url());
  if (!s) throw std::runtime_error(s.error().to_string());
  return std::move(*s);
}

AcquireSpec spec(const std::string& name, const std::string& label) {
  AcquireSpec a;
  a.name = name;
  a.token = OwnerToken::random();
  a.ttl = milliseconds(60'000);
  a.label = label;
  return a;
}

TEST(BatonStatus, NeedsCredentialsAfterTheAuthDelay) {
  for (const std::string path : {"/", "/status.json", "/events"}) {
    const auto t0 = std::chrono::steady_clock::now();
    std::string none = get(path, "");
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(none.rfind("HTTP/1.1 401 Unauthorized", 0), 0u) << none;
    EXPECT_NE(none.find("WWW-Authenticate: Basic"), std::string::npos);
    EXPECT_GE(took, milliseconds(200)) << path;  // auth_fail_delay: 250 ms
    std::string wrong = get(path, creds("jobs", "guess"));
    EXPECT_EQ(wrong.rfind("HTTP/1.1 401 Unauthorized", 0), 0u) << wrong;
  }
  std::string page = get("/", creds("jobs", kJobsPassword));
  EXPECT_EQ(page.rfind("HTTP/1.1 200 OK", 0), 0u) << page.substr(0, 200);
  EXPECT_NE(page.find("Content-Type: text/html"), std::string::npos);
  EXPECT_NE(page.find("new EventSource("), std::string::npos);
  // Self-contained: nothing loaded from elsewhere.
  EXPECT_EQ(page.find("http://", page.find("\r\n\r\n")), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
}

TEST(BatonStatus, AUserSeesOnlyWhatItMayRead) {
  auto admin = admin_store();
  const auto a = spec("jobs/status-a", "job-holder");
  const auto b = spec("other/status-b", "other-holder");
  ASSERT_TRUE(admin->acquire(a, {}));
  ASSERT_TRUE(admin->acquire(b, {}));
  ASSERT_TRUE(admin->counter_add("other/status-c", 7));
  ASSERT_TRUE(admin->counter_add("jobs/status-d", 3));

  std::string jobs = get("/status.json", creds("jobs", kJobsPassword));
  EXPECT_EQ(jobs.rfind("HTTP/1.1 200 OK", 0), 0u) << jobs;
  EXPECT_NE(jobs.find("\"user\":\"jobs\""), std::string::npos) << jobs;
  EXPECT_NE(jobs.find("\"name\":\"jobs/status-a\""), std::string::npos);
  EXPECT_NE(jobs.find("\"label\":\"job-holder\""), std::string::npos);
  EXPECT_NE(jobs.find("\"name\":\"jobs/status-d\",\"value\":3"),
            std::string::npos)
      << jobs;
  EXPECT_EQ(jobs.find("other/"), std::string::npos) << jobs;
  EXPECT_EQ(jobs.find("other-holder"), std::string::npos) << jobs;
  EXPECT_EQ(jobs.find("\"stats\""), std::string::npos) << jobs;  // admin only
  // The same through the stream.
  Http ev("/events", creds("jobs", kJobsPassword));
  const std::string first = ev.read_until("}}\n\n", milliseconds(5000));
  EXPECT_NE(first.find("Content-Type: text/event-stream"), std::string::npos);
  EXPECT_NE(first.find("jobs/status-a"), std::string::npos) << first;
  EXPECT_EQ(first.find("other/"), std::string::npos) << first;

  std::string all = get("/status.json", creds("admin", kAdminPassword));
  EXPECT_NE(all.find("\"name\":\"jobs/status-a\""), std::string::npos);
  EXPECT_NE(all.find("\"name\":\"other/status-b\""), std::string::npos);
  EXPECT_NE(all.find("\"label\":\"other-holder\""), std::string::npos);
  EXPECT_NE(all.find("\"name\":\"other/status-c\",\"value\":7"),
            std::string::npos);
  EXPECT_NE(all.find("\"stats\":{"), std::string::npos);
  // ?prefix= narrows it.
  std::string other = get("/status.json?prefix=other%2Fstatus-",
                          creds("admin", kAdminPassword));
  EXPECT_NE(other.find("\"prefix\":\"other/status-\""), std::string::npos);
  EXPECT_NE(other.find("other/status-b"), std::string::npos) << other;
  EXPECT_EQ(other.find("jobs/status-a"), std::string::npos) << other;
  ASSERT_TRUE(admin->release(a.name, a.token));
  ASSERT_TRUE(admin->release(b.name, b.token));
}

TEST(BatonStatus, PushesWhenWhatAStreamShowsChangesOnly) {
  auto admin = admin_store();
  Http ev("/events?prefix=jobs/push-", creds("jobs", kJobsPassword));
  ASSERT_EQ(ev.wait_events(1, milliseconds(5000)), 1u);
  // A change outside the stream's prefix: nothing is sent.
  auto outside = spec("other/push-x", "elsewhere");
  ASSERT_TRUE(admin->acquire(outside, {}));
  EXPECT_EQ(ev.wait_events(2, milliseconds(600)), 1u);
  // Inside: one snapshot with the new holder, within the push interval.
  auto inside = spec("jobs/push-y", "pushed-holder");
  const auto t0 = std::chrono::steady_clock::now();
  auto g = admin->acquire(inside, {});
  ASSERT_TRUE(g);
  EXPECT_EQ(ev.wait_events(2, milliseconds(3000)), 2u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(1500));
  std::string got = ev.read_until("pushed-holder", milliseconds(0));
  EXPECT_NE(got.find("\"label\":\"pushed-holder\""), std::string::npos) << got;
  // A burst of changes is coalesced: far fewer snapshots than changes.
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(admin->counter_add("jobs/push-n", 1));
  }
  const std::string burst = ev.read_until(
      "{\"name\":\"jobs/push-n\",\"value\":20}", milliseconds(3000));
  EXPECT_NE(burst.find("{\"name\":\"jobs/push-n\",\"value\":20}"),
            std::string::npos);
  // 20 round trips take far less than 20 push intervals (150 ms) here.
  EXPECT_LE(ev.events(), 2u + 10u);
  ASSERT_TRUE(admin->release("jobs/push-y", inside.token));
  ASSERT_TRUE(admin->release("other/push-x", outside.token));
}

// A wait that ended (granted, or timed out) is in the history as one
// "wait" event from its start to its end: what the timeline shades.
TEST(BatonStatus, HistoryRecordsWaitsThatEnded) {
  auto admin = admin_store();
  Client c = *Client::open(baton_url());
  AcquireOptions o;
  o.ttl = milliseconds(60'000);
  o.label = "hist-owner";
  auto held = c.try_acquire("jobs/hist-wait", o);
  ASSERT_TRUE(held) << held.error().to_string();
  o.label = "hist-waiter";
  // Runs out after about 300 ms: a wait that left without a grant.
  auto timed_out = c.acquire("jobs/hist-wait", milliseconds(300), o);
  ASSERT_FALSE(timed_out);
  ASSERT_TRUE(c.release(*held));
  const std::string h =
      get("/history.json?lock=jobs/hist-wait", creds("admin", kAdminPassword));
  const std::string wait =
      "{\"kind\":\"wait\",\"lock\":\"jobs/hist-wait\",\"label\":"
      "\"hist-waiter\",\"at_ms\":";
  const auto at = h.find(wait);
  ASSERT_NE(at, std::string::npos) << h;
  const auto from = std::stoll(h.substr(at + wait.size()));
  const auto end_at = h.find("\"end_ms\":", at);
  ASSERT_NE(end_at, std::string::npos) << h;
  const auto to = std::stoll(h.substr(end_at + 9));
  EXPECT_GE(to - from, 250) << h;  // the wait's ~300 ms
  EXPECT_LT(to - from, 5000) << h;

  // The same document over the lock protocol (LOCK.HISTORY), what `baton
  // status --history LOCK` reads without --from; read permission needed.
  Raw admin_conn(test_server().port());
  ASSERT_EQ(admin_conn.call({"AUTH", "admin", kAdminPassword}).str, "OK");
  auto r = admin_conn.call({"LOCK.HISTORY", "jobs/hist-wait"});
  ASSERT_EQ(r.type, proto::Reply::Type::string) << r.str;
  EXPECT_NE(r.str.find(wait), std::string::npos) << r.str;
  auto bad = admin_conn.call({"LOCK.HISTORY", std::string("a\0b", 3)});
  EXPECT_EQ(bad.type, proto::Reply::Type::error);
  EXPECT_EQ(bad.str.rfind("invalid_argument ", 0), 0u) << bad.str;
  Raw jobs_conn(test_server().port());
  ASSERT_EQ(jobs_conn.call({"AUTH", "jobs", kJobsPassword}).str, "OK");
  auto denied = jobs_conn.call({"LOCK.HISTORY", "other/hist"});
  EXPECT_EQ(denied.str.rfind("permission_denied user \"jobs\" may not run "
                             "LOCK.HISTORY on \"other/hist\": no read",
                             0),
            0u)
      << denied.str;
  auto own = jobs_conn.call({"LOCK.HISTORY", "jobs/hist-wait"});
  EXPECT_EQ(own.type, proto::Reply::Type::string) << own.str;
  // The store's call, as the CLI makes it.
  auto store = open_store(baton_url());
  ASSERT_TRUE(store) << store.error().to_string();
  auto doc = (*store)->history("jobs/hist-wait", CallContext());
  ASSERT_TRUE(doc) << doc.error().to_string();
  EXPECT_NE(doc->find(wait), std::string::npos) << *doc;
  // A store that records no history says so, naming itself.
  auto memory = open_store("memory:hist");
  ASSERT_TRUE(memory) << memory.error().to_string();
  auto none = (*memory)->history("jobs/hist-wait", CallContext());
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), Errc::unsupported);
  EXPECT_NE(none.error().message().find("memory:hist keeps no history"),
            std::string::npos)
      << none.error().to_string();
}

TEST(BatonStatus, RefusesBadQueriesAndTooManyStreams) {
  const std::string admin = creds("admin", kAdminPassword);
  std::string bad = get("/status.json?prefx=a", admin);
  EXPECT_EQ(bad.rfind("HTTP/1.1 400 Bad Request", 0), 0u) << bad;
  EXPECT_NE(bad.find("unknown query parameter \"prefx\""), std::string::npos);
  bad = get("/events?prefix=%zz", admin);
  EXPECT_EQ(bad.rfind("HTTP/1.1 400 Bad Request", 0), 0u) << bad;
  EXPECT_NE(bad.find("bad %-escape"), std::string::npos) << bad;
  // 64 streams at once; the 65th is told to come back later.
  std::vector<std::unique_ptr<Http>> streams;
  for (int i = 0; i < 64; ++i) {
    streams.push_back(std::make_unique<Http>("/events?prefix=none/", admin));
    ASSERT_NE(streams.back()
                  ->read_until("\n\ndata: ", milliseconds(5000))
                  .find("200 OK"),
              std::string::npos)
        << i;
  }
  std::string refused = get("/events", admin);
  EXPECT_EQ(refused.rfind("HTTP/1.1 503 Service Unavailable", 0), 0u)
      << refused;
  EXPECT_NE(refused.find("too many status streams"), std::string::npos);
  // /metrics is still answered meanwhile.
  std::string metrics = get("/metrics", admin);
  EXPECT_EQ(metrics.rfind("HTTP/1.1 200 OK", 0), 0u) << metrics;
  // Closed streams free their places.
  streams.clear();
  bool again = false;
  for (int i = 0; i < 100 && !again; ++i) {
    Http ev("/events?prefix=none/", admin);
    again = ev.read_until("\n\ndata: ", milliseconds(2000)).find("200 OK") !=
            std::string::npos;
    if (!again) std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(again);
}

}  // namespace
}  // namespace baton::testing
