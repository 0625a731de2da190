// tests/server/status_timeline_test.cc — the status page's holders, queue
// order and timeline in a real headless Chromium, on one store per binary
// (STORE_KIND): batond serving its own page (metrics listener), or
// postgres / etcd through `baton status --serve` (private servers on
// loopback, tests/support/stores).
//
// A known sequence on tl/job: alpha granted and released, beta granted and
// released, gamma granted and left to expire. The timeline must draw three
// bars in that order with those labels and fencing tokens, the last marked
// expired; tl/queue shows its holder and two waiters in queue order.
// `baton status --history tl/job --from <page>` must print the same
// sequence, and bad page parameters must get 400 and change nothing.
// BATON_STATUS_SCREENSHOT_DIR=<dir> keeps the screenshot there (the PNGs
// in docs/ are made that way).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "baton/client.h"
#include "batond_process.h"
#include "child_process.h"
#include "status_page_driver.h"
#include "tests/support/stores/store_cluster.h"

namespace baton::testing {
namespace {

using std::chrono::milliseconds;
namespace fs = std::filesystem;
const std::string kKind = STORE_KIND;

// The page server: batond's own, or `baton status --serve` on the store.
struct PageServer {
  std::unique_ptr<BatondProcess> batond;
  std::unique_ptr<StoreCluster> cluster;
  pid_t serve = -1;
  std::string store_url;
  std::uint16_t port = 0;
  ~PageServer() {
    if (serve > 0) stop_child(serve, milliseconds(3000));
  }
};

std::string http(std::uint16_t port, const std::string& target) {
  return loopback_request("GET " + target + " HTTP/1.0\r\n\r\n", port,
                          milliseconds(5000));
}

void start(PageServer& s, const std::string& work) {
  s.port = free_loopback_port();
  if (kKind == "batond") {
    fs::create_directories(work + "/batond");
    s.batond = std::make_unique<BatondProcess>(
        work + "/batond",
        std::vector<std::string>{"--metrics-listen",
                                 "127.0.0.1:" + std::to_string(s.port)});
    s.store_url = s.batond->url();
    return;
  }
  StoreOptions o;
  o.kind = kKind;
  o.proxies = false;
  o.lease_ttl = milliseconds(5000);
  std::string error;
  s.cluster = StoreCluster::start(o, work, &error);
  if (!s.cluster)
    throw std::runtime_error("cannot start " + kKind + ": " + error);
  s.store_url = s.cluster->direct_url();
  s.serve = spawn_logged({BATON_CLI_PATH, "--store", s.store_url, "status",
                          "--serve", "127.0.0.1:" + std::to_string(s.port),
                          "--interval", "200ms", "--prefix", "tl/"},
                         work + "/serve.log");
  for (int i = 0; i < 200; ++i) {
    if (http(s.port, "/status.json").find("200 OK") != std::string::npos) {
      return;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  throw std::runtime_error("baton status --serve did not answer: " +
                           file_tail(work + "/serve.log", 2000));
}

std::string run_cli(const std::string& args) {
  std::string out;
  FILE* p = ::popen(
      (std::string(BATON_CLI_PATH) + " " + args + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

std::string labels_js(const std::string& lock, const std::string& kind) {
  return "[...document.querySelectorAll('tr[data-lock=\"" + lock + "\"] li." +
         kind + " .who')].map(e => e.textContent).join(',')";
}
// The bars of a timeline row, by start: label#token:end, comma-separated.
std::string bars_js(const std::string& lock) {
  return "[...document.querySelectorAll('#timeline g.row[data-lock=\"" + lock +
         "\"] g.bar')].sort((a, b) => a.dataset.from - b.dataset.from)"
         ".map(g => g.dataset.label + '#' + g.dataset.token + ':' + "
         "g.dataset.end).join(',')";
}

TEST(StatusTimeline, HoldersQueueAndTimelineBars) {
  char tmpl[] = "/tmp/baton-status-timeline-XXXXXX";
  const std::string work = ::mkdtemp(tmpl);
  SCOPED_TRACE("store " + kKind + "; logs (kept on failure) in " + work);
  PageServer server;
  ASSERT_NO_THROW(start(server, work));
  auto open = [&] {
    auto c = Client::open(server.store_url);
    if (!c) throw std::runtime_error(c.error().to_string());
    return std::move(*c);
  };
  Client c = open();
  AcquireOptions ao;
  ao.ttl = milliseconds(60'000);

  // tl/queue: a holder and two waiters, in this order.
  ao.label = "owner";
  auto owner = c.try_acquire("tl/queue", ao);
  ASSERT_TRUE(owner) << owner.error().to_string();
  Client w1 = open(), w2 = open();
  std::stop_source stop;
  auto wait_in = [&](Client& w, const char* label) {
    AcquireOptions o = ao;
    o.label = label;
    o.stop = stop.get_token();
    (void)w.acquire("tl/queue", milliseconds(60'000), o);
  };
  auto queued = [&](std::size_t n) {
    for (int i = 0; i < 500; ++i) {
      auto d = c.describe("tl/queue");
      if (d && d->waiters.size() == n) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  };
  std::jthread t1([&] { wait_in(w1, "waiter-1"); });
  ASSERT_TRUE(queued(1));
  std::jthread t2([&] { wait_in(w2, "waiter-2"); });
  ASSERT_TRUE(queued(2));

  // tl/past (batond: its history records waits where its table changes):
  // a wait of about a second that ended in a grant, drawn as a past wait.
  std::jthread past;
  if (kKind == "batond") {
    AcquireOptions o = ao;
    o.label = "past-owner";
    auto held = c.try_acquire("tl/past", o);
    ASSERT_TRUE(held) << held.error().to_string();
    Client w3 = open();
    past = std::jthread([&c, w3 = std::move(w3), ao]() mutable {
      AcquireOptions wo = ao;
      wo.label = "past-waiter";
      auto l = w3.acquire("tl/past", milliseconds(30'000), wo);
      if (l) (void)w3.release(*l);
    });
    bool waiting = false;
    for (int i = 0; i < 500 && !waiting; ++i) {
      auto info = c.describe("tl/past");
      waiting = info && info->waiters.size() == 1;
      if (!waiting) std::this_thread::sleep_for(milliseconds(20));
    }
    ASSERT_TRUE(waiting);
    std::this_thread::sleep_for(milliseconds(1000));
    ASSERT_TRUE(c.release(*held));
    past.join();
  }

  // tl/job: alpha, beta (released), gamma (left to expire). Each held
  // well over a poll interval, so that every poll-derived event is seen.
  std::vector<std::uint64_t> tokens;
  for (const char* label : {"alpha", "beta"}) {
    AcquireOptions o = ao;
    o.label = label;
    auto l = c.try_acquire("tl/job", o);
    ASSERT_TRUE(l) << l.error().to_string();
    tokens.push_back(l->fencing_token);
    std::this_thread::sleep_for(milliseconds(1500));
    ASSERT_TRUE(c.release(*l));
    std::this_thread::sleep_for(milliseconds(500));
  }
  {
    AcquireOptions o = ao;
    o.label = "gamma";
    o.ttl = milliseconds(2000);
    auto l = c.try_acquire("tl/job", o);
    ASSERT_TRUE(l) << l.error().to_string();
    tokens.push_back(l->fencing_token);
    bool gone = false;
    for (int i = 0; i < 150 && !gone; ++i) {
      std::this_thread::sleep_for(milliseconds(100));
      auto d = c.describe("tl/job");
      gone = d && d->holders.empty();
    }
    ASSERT_TRUE(gone) << "gamma's lease did not expire";
    std::this_thread::sleep_for(milliseconds(600));  // a poll saw it
  }
  const std::string want = "alpha#" + std::to_string(tokens[0]) +
                           ":release,beta#" + std::to_string(tokens[1]) +
                           ":release,gamma#" + std::to_string(tokens[2]) +
                           ":expire";

  Driver d(work);
  ASSERT_EQ(d.line(milliseconds(30'000)), "ok ready");
  std::string a = d.send(
      "open http://127.0.0.1:" + std::to_string(server.port) + "/?prefix=tl/");
  ASSERT_TRUE(ok(a)) << a;
  a = d.send("wait 8000 " + bars_js("tl/job") + " === '" + want + "'");
  EXPECT_TRUE(ok(a)) << a << " (want " << want << ")";
  EXPECT_EQ(value(d.send("eval " + labels_js("tl/queue", "holder"))), "owner");
  EXPECT_EQ(value(d.send("eval " + labels_js("tl/queue", "waiter"))),
            "waiter-1,waiter-2");
  // Each bar's drawn text: its label and fencing token; the expiry marked.
  const std::string texts = value(d.send(
      "eval [...document.querySelectorAll('#timeline g.row[data-lock=\"tl/"
      "job\"] g.bar text')].map(t => t.textContent).join(',')"));
  for (std::size_t i = 0; i < 3; ++i) {
    const char* label = i == 0 ? "alpha" : i == 1 ? "beta" : "gamma";
    EXPECT_NE(texts.find(std::string(label) + " #" + std::to_string(tokens[i])),
              std::string::npos)
        << texts;
  }
  EXPECT_EQ(value(d.send("eval String(document.querySelectorAll('#timeline "
                         "g.bar.expire path.end-expire').length)")),
            "1");
  // The live holder's bar is open; the waits are shaded.
  EXPECT_EQ(value(d.send("eval " + bars_js("tl/queue"))),
            "owner#" + std::to_string(owner->fencing_token) + ":held");
  EXPECT_EQ(value(d.send("eval String(document.querySelectorAll('#timeline "
                         "g.row[data-lock=\"tl/queue\"] g.wait').length)")),
            "2");

  if (kKind == "batond") {
    // The wait that ended on tl/past: shaded from the history, not live.
    const std::string past_waits =
        "[...document.querySelectorAll('#timeline g.row[data-lock=\"tl/"
        "past\"] g.wait')]";
    EXPECT_EQ(value(d.send("eval String(" + past_waits + ".length)")), "1");
    const std::string title =
        value(d.send("eval " + past_waits +
                     ".map(g => g.dataset.label + ' ' + "
                     "g.querySelector('title').textContent).join(',')"));
    EXPECT_EQ(title.rfind("past-waiter past-waiter waited ", 0), 0u) << title;
    EXPECT_EQ(title.find("still waiting"), std::string::npos) << title;
  }

  const std::string shot = work + "/timeline.png";
  a = d.send("shot " + shot);
  ASSERT_TRUE(ok(a)) << a;
  EXPECT_GT(fs::file_size(shot), 10'000u);
  if (const char* dir = std::getenv("BATON_STATUS_SCREENSHOT_DIR")) {
    const std::string name = kKind == "batond"
                                 ? "status-page-timeline.png"
                                 : "status-serve-" + kKind + ".png";
    fs::copy_file(shot, std::string(dir) + "/" + name,
                  fs::copy_options::overwrite_existing);
  }

  // The same history as text, from the page server.
  const std::string from = "http://127.0.0.1:" + std::to_string(server.port);
  const std::string text = run_cli("status --history tl/job --from " + from);
  std::size_t at = 0;
  for (const std::string& line :
       {"grant    " + std::to_string(tokens[0]) + " ",
        "release  " + std::to_string(tokens[0]) + " ",
        "grant    " + std::to_string(tokens[1]) + " ",
        "release  " + std::to_string(tokens[1]) + " ",
        "grant    " + std::to_string(tokens[2]) + " ",
        "expire   " + std::to_string(tokens[2]) + " "}) {
    const std::size_t next = text.find(line, at);
    EXPECT_NE(next, std::string::npos) << "'" << line << "' in order in:\n"
                                       << text;
    if (next != std::string::npos) at = next;
  }
  EXPECT_NE(run_cli("status --history tl/job --from " + from + " --json")
                .find("\"kind\":\"expire\""),
            std::string::npos);
  if (kKind == "batond") {
    // Without --from: batond's own history over its lock protocol, the
    // same events (and the past wait of tl/past).
    const std::string direct =
        run_cli("--store " + server.store_url + " status --history tl/job");
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_NE(direct.find("grant    " + std::to_string(tokens[i]) + " "),
                std::string::npos)
          << direct;
    }
    EXPECT_NE(direct.find("expire   " + std::to_string(tokens[2]) + " "),
              std::string::npos)
        << direct;
    EXPECT_NE(
        run_cli("--store " + server.store_url + " status --history tl/past")
            .find("past-waiter (waited "),
        std::string::npos);
  }

  // Bad parameters: 400 with the reason; nothing changes.
  const std::string before = http(server.port, "/history.json?prefix=tl/");
  const std::string long_name(600, 'x');
  for (const auto& [target, reason] :
       std::vector<std::pair<std::string, std::string>>{
           {"/status.json?prefix=" + long_name, "the limit is 512"},
           {"/events?prefix=a%ffb", "not UTF-8"},
           {"/?prefix=a%0ab", "control character"},
           {"/status.json?lock=tl/job", "unknown query parameter"},
           {"/history.json?lock=" + long_name, "the limit is 512"},
           {"/history.json?lock=tl/job&prefix=tl/", "not both"},
           {"/history.json?lock=tl%2", "bad %-escape"},
           {"/history.json?prefix=a&prefix=b", "given twice"},
           {"/history.json?since=1", "unknown query parameter"}}) {
    const std::string r = http(server.port, target);
    EXPECT_EQ(r.rfind("HTTP/1.1 400 Bad Request", 0), 0u)
        << target << ": " << r;
    EXPECT_NE(r.find(reason), std::string::npos) << target << ": " << r;
  }
  const std::string after = http(server.port, "/history.json?prefix=tl/");
  auto events = [](const std::string& r) {
    return r.substr(r.find("\"events\":"));
  };
  EXPECT_EQ(events(before), events(after));
  EXPECT_NE(run_cli("status --history tl/job --from http://127.0.0.1:" +
                    std::to_string(server.port) + "/x")
                .find("grant"),
            std::string::npos);

  stop.request_stop();
  t1.join();
  t2.join();
  std::error_code ec;
  if (!::testing::Test::HasFailure()) fs::remove_all(work, ec);
}

}  // namespace
}  // namespace baton::testing

int main(int argc, char** argv) {
  return baton::testing::browser_test_main(argc, argv, "status_timeline_test");
}
