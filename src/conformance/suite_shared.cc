// conformance/suite_shared.cc — rule 18, read-write locks
// (Client::acquire_shared beside the exclusive acquire on the same name):
// readers hold together, a writer alone, one FIFO queue across both kinds
// (a reader behind a waiting writer waits; consecutive readers at the head
// are granted together), a writer is not starved by a stream of readers,
// fencing tokens increase across kinds, each shared lease has its own
// owner token, describe() shows the mode of every holder and waiter,
// multi-lock requests are exclusive (they wait for readers).
//
// A store without shared mode marks "shared" in StoreTraits::unsupported;
// each test then checks that the store refuses a shared request with
// `unsupported` naming the store (and that nothing changed), and skips.
#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "baton/conformance.h"
#include "conformance/suite_helpers.h"

namespace baton::conformance {
namespace {

// On a store without shared mode: the refusal is `unsupported`, names the
// store, and leaves no trace; then the test is skipped with the reason.
#define BATON_REQUIRE_SHARED()                                                \
  do {                                                                        \
    if (const std::string* why_ = unsupported_reason("shared")) {             \
      const std::string n_ = lock_name("refused");                            \
      auto r_ = client().acquire_shared(n_, 0ms, opts(5s));                   \
      ASSERT_FALSE(r_.ok()) << "a store marked without shared mode granted";  \
      EXPECT_EQ(r_.error().code(), Errc::unsupported)                         \
          << r_.error().to_string();                                          \
      EXPECT_NE(r_.error().message().find(client().url()), std::string::npos) \
          << "the refusal does not name the store: "                          \
          << r_.error().to_string();                                          \
      auto i_ = client().describe(n_);                                        \
      ASSERT_TRUE(i_.ok()) << i_.error().to_string();                         \
      EXPECT_TRUE(i_->holders.empty() && i_->waiters.empty());                \
      GTEST_SKIP() << "shared mode is not offered by this store: " << *why_;  \
    }                                                                         \
  } while (0)

// describe(): (holders, waiters), each as a string of 'S'/'X' in order.
std::pair<std::string, std::string> modes(const Client& c,
                                          const std::string& name) {
  auto info = c.describe(name);
  if (!info.ok()) return {"error", info.error().to_string()};
  std::string h, w;
  for (const auto& x : info->holders) h += x.shared ? 'S' : 'X';
  for (const auto& x : info->waiters) w += x.shared ? 'S' : 'X';
  return {h, w};
}

TEST_P(ConformanceTest, Shared_ReadersHoldTogetherWritersWait) {
  BATON_REQUIRE_SHARED();
  const std::string name = lock_name("readers");
  std::vector<Lease> readers;
  for (int i = 0; i < 3; ++i) {
    auto r = client().acquire_shared(name, 0ms,
                                     opts(30s, 1, "r" + std::to_string(i)));
    ASSERT_TRUE(r.ok()) << "reader " << i << ": " << r.error().to_string();
    EXPECT_TRUE(r->shared);
    EXPECT_EQ(r->capacity, 1u);
    readers.push_back(*r);
  }
  // Each reader has its own owner token and its own fencing token.
  for (std::size_t i = 1; i < readers.size(); ++i) {
    EXPECT_NE(readers[i].token, readers[i - 1].token);
    EXPECT_GT(readers[i].fencing_token, readers[i - 1].fencing_token);
  }
  EXPECT_EQ(modes(client(), name),
            std::make_pair(std::string("SSS"), std::string("")));
  auto info = client().describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(info->holders[i].label, "r" + std::to_string(i));
    EXPECT_EQ(info->holders[i].fencing_token, readers[i].fencing_token);
  }
  // A writer is refused while any reader holds.
  auto w = client().try_acquire(name, opts(5s, 1, "writer"));
  ASSERT_FALSE(w.ok()) << "a writer was granted beside 3 readers";
  EXPECT_EQ(w.error().code(), Errc::not_acquired) << w.error().to_string();
  EXPECT_EQ(w.error().holders().size(), 3u);
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(*client().release(readers[i]));
  w = client().try_acquire(name, opts(5s, 1, "writer"));
  ASSERT_FALSE(w.ok()) << "a writer was granted beside a reader";
  EXPECT_TRUE(*client().release(readers[2]));
  w = client().try_acquire(name, opts(5s, 1, "writer"));
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  EXPECT_FALSE(w->shared);
  EXPECT_GT(w->fencing_token, readers[2].fencing_token);
  EXPECT_TRUE(*client().release(*w));
}

TEST_P(ConformanceTest, Shared_WriterHoldsAlone) {
  BATON_REQUIRE_SHARED();
  const std::string name = lock_name("writer");
  auto w = client().try_acquire(name, opts(30s, 1, "writer"));
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  auto r = client().acquire_shared(name, 0ms, opts(5s, 1, "reader"));
  ASSERT_FALSE(r.ok()) << "a reader was granted beside a writer";
  EXPECT_EQ(r.error().code(), Errc::not_acquired) << r.error().to_string();
  ASSERT_EQ(r.error().holders().size(), 1u);
  EXPECT_FALSE(r.error().holders()[0].shared);
  EXPECT_EQ(r.error().holders()[0].fencing_token, w->fencing_token);
  // A blocking reader waits and is granted when the writer leaves.
  auto waiting = std::async(std::launch::async, [&] {
    return client().acquire_shared(name, 30s, opts(30s, 1, "reader"));
  });
  ASSERT_TRUE(eventually([&] { return waiters_of(client(), name) == 1; }));
  EXPECT_EQ(modes(client(), name),
            std::make_pair(std::string("X"), std::string("S")));
  EXPECT_TRUE(*client().release(*w));
  auto got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_TRUE(got->shared);
  EXPECT_GT(got->fencing_token, w->fencing_token);
  EXPECT_TRUE(*client().release(*got));
}

TEST_P(ConformanceTest, Shared_FifoAcrossKindsReaderBehindWriterWaits) {
  BATON_REQUIRE_SHARED();
  const std::string name = lock_name("fifo");
  auto r1 = client().acquire_shared(name, 0ms, opts(30s, 1, "r1"));
  ASSERT_TRUE(r1.ok()) << r1.error().to_string();
  auto writer = std::async(std::launch::async, [&] {
    return client().acquire(name, 30s, opts(30s, 1, "w"));
  });
  ASSERT_TRUE(eventually([&] { return waiters_of(client(), name) == 1; }));
  // A reader may not join the readers past a waiting writer.
  auto sneaky = client().acquire_shared(name, 0ms, opts(5s, 1, "sneaky"));
  ASSERT_FALSE(sneaky.ok()) << "a reader overtook a waiting writer";
  EXPECT_EQ(sneaky.error().code(), Errc::not_acquired);
  auto r2 = std::async(std::launch::async, [&] {
    return client().acquire_shared(name, 30s, opts(30s, 1, "r2"));
  });
  ASSERT_TRUE(eventually([&] { return waiters_of(client(), name) == 2; }));
  EXPECT_EQ(modes(client(), name),
            std::make_pair(std::string("S"), std::string("XS")));
  auto info = client().describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->waiters.size(), 2u);
  EXPECT_EQ(info->waiters[0].label, "w");
  EXPECT_EQ(info->waiters[1].label, "r2");
  // r1 leaves: the writer, not r2, is next.
  EXPECT_TRUE(*client().release(*r1));
  auto w = writer.get();
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  EXPECT_FALSE(w->shared);
  EXPECT_EQ(r2.wait_for(200ms), std::future_status::timeout)
      << "the reader behind the writer was granted with it";
  EXPECT_EQ(modes(client(), name),
            std::make_pair(std::string("X"), std::string("S")));
  EXPECT_TRUE(*client().release(*w));
  auto got = r2.get();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_GT(got->fencing_token, w->fencing_token);
  EXPECT_TRUE(*client().release(*got));
}

TEST_P(ConformanceTest, Shared_ConsecutiveReadersAtTheHeadAreGrantedTogether) {
  BATON_REQUIRE_SHARED();
  const std::string name = lock_name("batch");
  auto w1 = client().try_acquire(name, opts(30s, 1, "w1"));
  ASSERT_TRUE(w1.ok()) << w1.error().to_string();
  // Queue: r1 r2 w2 r3.
  const char* order[] = {"r1", "r2", "w2", "r3"};
  std::vector<std::future<Result<Lease>>> f;
  for (int i = 0; i < 4; ++i) {
    const std::string label = order[i];
    const bool shared = label[0] == 'r';
    f.push_back(std::async(std::launch::async, [&, label, shared] {
      return shared ? client().acquire_shared(name, 30s, opts(30s, 1, label))
                    : client().acquire(name, 30s, opts(30s, 1, label));
    }));
    ASSERT_TRUE(eventually([&] { return waiters_of(client(), name) == i + 1; }))
        << label << " never showed up in the queue";
  }
  EXPECT_EQ(modes(client(), name),
            std::make_pair(std::string("X"), std::string("SSXS")));
  EXPECT_TRUE(*client().release(*w1));
  auto r1 = f[0].get();
  auto r2 = f[1].get();
  ASSERT_TRUE(r1.ok()) << r1.error().to_string();
  ASSERT_TRUE(r2.ok()) << r2.error().to_string();
  EXPECT_EQ(modes(client(), name),
            std::make_pair(std::string("SS"), std::string("XS")));
  EXPECT_EQ(f[2].wait_for(100ms), std::future_status::timeout);
  EXPECT_EQ(f[3].wait_for(0ms), std::future_status::timeout);
  EXPECT_TRUE(*client().release(*r1));
  EXPECT_EQ(f[2].wait_for(100ms), std::future_status::timeout)
      << "the writer was granted beside a reader";
  EXPECT_TRUE(*client().release(*r2));
  auto w2 = f[2].get();
  ASSERT_TRUE(w2.ok()) << w2.error().to_string();
  EXPECT_EQ(f[3].wait_for(100ms), std::future_status::timeout);
  EXPECT_TRUE(*client().release(*w2));
  auto r3 = f[3].get();
  ASSERT_TRUE(r3.ok()) << r3.error().to_string();
  EXPECT_TRUE(r3->shared);
  EXPECT_TRUE(*client().release(*r3));
}

TEST_P(ConformanceTest, Shared_WriterIsNotStarvedByAStreamOfReaders) {
  BATON_REQUIRE_SHARED();
  const std::string name = lock_name("starve");
  // Four readers take turns so that at every moment some reader holds:
  // without FIFO across kinds a writer would never get in.
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0};
  std::atomic<int> errors{0};
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::atomic<bool> writing{false};
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&, i] {
      while (!stop.load()) {
        auto r = client().acquire_shared(name, 20s,
                                         opts(10s, 1, "r" + std::to_string(i)));
        if (!r.ok()) {
          errors.fetch_add(1);
          continue;
        }
        if (writing.load()) overlap = true;
        inside.fetch_add(1);
        reads.fetch_add(1);
        std::this_thread::sleep_for(30ms);
        inside.fetch_sub(1);
        (void)client().release(*r);
      }
    });
  }
  ASSERT_TRUE(eventually([&] { return reads.load() >= 8; }));
  const auto t0 = steady_clock::now();
  auto w = client().acquire(name, 20s, opts(10s, 1, "writer"));
  const auto took = steady_clock::now() - t0;
  if (w.ok()) {
    writing = true;
    if (inside.load() != 0) overlap = true;
    std::this_thread::sleep_for(50ms);
    if (inside.load() != 0) overlap = true;
    writing = false;
    (void)client().release(*w);
  }
  stop = true;
  for (auto& t : readers) t.join();
  ASSERT_TRUE(w.ok()) << "the writer starved: " << w.error().to_string();
  EXPECT_LT(took, 10s) << "the writer waited far longer than the readers ahead";
  EXPECT_FALSE(overlap.load()) << "a reader held while the writer did";
  EXPECT_EQ(errors.load(), 0);
}

TEST_P(ConformanceTest, Shared_FencingIncreasesAcrossKinds) {
  BATON_REQUIRE_SHARED();
  const std::string name = lock_name("fencing");
  std::uint64_t last = 0;
  // S S (together), X, S, X, S S.
  auto s1 = client().acquire_shared(name, 0ms, opts(30s));
  auto s2 = client().acquire_shared(name, 0ms, opts(30s));
  ASSERT_TRUE(s1.ok() && s2.ok());
  EXPECT_GT(s1->fencing_token, last);
  EXPECT_GT(s2->fencing_token, s1->fencing_token);
  last = s2->fencing_token;
  EXPECT_TRUE(*client().release(*s1));
  EXPECT_TRUE(*client().release(*s2));
  for (int round = 0; round < 2; ++round) {
    auto x = client().try_acquire(name, opts(30s));
    ASSERT_TRUE(x.ok()) << x.error().to_string();
    EXPECT_GT(x->fencing_token, last);
    last = x->fencing_token;
    EXPECT_TRUE(*client().release(*x));
    auto s = client().acquire_shared(name, 0ms, opts(30s));
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    EXPECT_GT(s->fencing_token, last);
    last = s->fencing_token;
    EXPECT_TRUE(*client().release(*s));
  }
  auto info = client().describe(name);
  ASSERT_TRUE(info.ok());
  EXPECT_GE(info->last_fencing_token, last);
}

TEST_P(ConformanceTest, Shared_ReleaseAndExtendTakeTheLeasesOwnToken) {
  BATON_REQUIRE_SHARED();
  const std::string name = lock_name("own-token");
  auto r1 = client().acquire_shared(name, 0ms, opts(30s, 1, "r1"));
  auto r2 = client().acquire_shared(name, 0ms, opts(30s, 1, "r2"));
  ASSERT_TRUE(r1.ok() && r2.ok());
  Lease stranger = *r1;
  stranger.token = OwnerToken::random();
  auto rel = client().release(stranger);
  ASSERT_TRUE(rel.ok()) << rel.error().to_string();
  EXPECT_FALSE(*rel) << "a stranger's token released a shared lease";
  auto ext = client().extend(stranger, 30s);
  ASSERT_FALSE(ext.ok()) << "a stranger's token extended a shared lease";
  EXPECT_EQ(ext.error().code(), Errc::lock_lost) << ext.error().to_string();
  // Extending r1 leaves r2 alone; the lease stays shared.
  auto e1 = client().extend(*r1, 40s);
  ASSERT_TRUE(e1.ok()) << e1.error().to_string();
  EXPECT_EQ(e1->fencing_token, r1->fencing_token);
  EXPECT_EQ(modes(client(), name),
            std::make_pair(std::string("SS"), std::string("")));
  // Releasing r1 leaves r2 holding.
  EXPECT_TRUE(*client().release(*r1));
  EXPECT_FALSE(*client().release(*r1));  // idempotent
  auto info = client().describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, r2->fencing_token);
  EXPECT_TRUE(info->holders[0].shared);
  auto e2 = client().extend(*r2, 30s);
  EXPECT_TRUE(e2.ok()) << e2.error().to_string();
  EXPECT_TRUE(*client().release(*r2));
  EXPECT_EQ(modes(client(), name),
            std::make_pair(std::string(""), std::string("")));
}

TEST_P(ConformanceTest, Shared_ExpiredReaderLetsTheWriterIn) {
  BATON_REQUIRE_SHARED();
  BATON_REQUIRE("rule3");
  const std::string name = lock_name("expiry");
  // t0 before the reader's grant: the writer's comes at least the reader's
  // TTL later (less a little for the store's clock against ours), however
  // slowly the reader's reply arrived.
  const auto t0 = steady_clock::now();
  auto r = client().acquire_shared(name, 0ms, opts(400ms, 1, "short"));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  auto w = client().acquire(name, 20s, opts(30s, 1, "writer"));
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  EXPECT_GE(steady_clock::now() - t0, 350ms) << "granted beside the reader";
  EXPECT_GT(w->fencing_token, r->fencing_token);
  EXPECT_TRUE(*client().release(*w));
}

TEST_P(ConformanceTest, Shared_RetryWithTheSameTokenIsTheSameLease) {
  BATON_REQUIRE_SHARED();
  BATON_REQUIRE("rule17");
  const std::string name = lock_name("retry");
  AcquireOptions o = opts(30s);
  o.token = OwnerToken::random();
  auto a = client().acquire_shared(name, 0ms, o);
  auto b = client().acquire_shared(name, 0ms, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->fencing_token, b->fencing_token);
  EXPECT_EQ(a->token, b->token);
  EXPECT_TRUE(b->shared);
  EXPECT_EQ(modes(client(), name),
            std::make_pair(std::string("S"), std::string("")));
  EXPECT_TRUE(*client().release(*a));
}

TEST_P(ConformanceTest, Shared_BadInputIsRefusedAndChangesNothing) {
  BATON_REQUIRE_SHARED();
  const std::string name = lock_name("bad");
  auto r = client().acquire_shared(name, 0ms, opts(30s, 2));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::invalid_argument);
  EXPECT_NE(r.error().message().find("capacity 1"), std::string::npos)
      << r.error().to_string();
  AcquireOptions o = opts(30s);
  o.reentrancy_key = "k";
  r = client().acquire_shared(name, 0ms, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::invalid_argument);
  EXPECT_NE(r.error().message().find("reentrancy"), std::string::npos)
      << r.error().to_string();
  // A shared holder fixes the lock's capacity at 1 like any request.
  auto s = client().acquire_shared(name, 0ms, opts(30s));
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  auto sem = client().try_acquire(name, opts(30s, 3));
  ASSERT_FALSE(sem.ok());
  EXPECT_TRUE(sem.error().code() == Errc::invalid_argument ||
              sem.error().code() == Errc::not_acquired)
      << sem.error().to_string();
  EXPECT_EQ(modes(client(), name),
            std::make_pair(std::string("S"), std::string("")));
  EXPECT_TRUE(*client().release(*s));
}

// Cancellable waits cover acquire_shared too: a stop withdraws
// the shared request and leaves no trace in the queue.
TEST_P(ConformanceTest, Shared_StopEndsASharedWaitAndLeavesNoTrace) {
  BATON_REQUIRE_SHARED();
  BATON_REQUIRE("cancel");
  const std::string name = lock_name("cancel");
  auto w = client().try_acquire(name, opts(30s, 1, "writer"));
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  std::stop_source stop;
  AcquireOptions o = opts(10s, 1, "reader");
  o.stop = stop.get_token();
  auto waiting = std::async(std::launch::async, [&] {
    return client().acquire_shared(name, 30s, o);
  });
  ASSERT_TRUE(eventually([&] { return waiters_of(client(), name) == 1; }));
  stop.request_stop();
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);
  auto r = waiting.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::cancelled) << r.error().to_string();
  EXPECT_EQ(modes(client(), name),
            std::make_pair(std::string("X"), std::string("")));
  EXPECT_TRUE(*client().release(*w));
  EXPECT_EQ(modes(client(), name),
            std::make_pair(std::string(""), std::string("")));
}

// Multi-lock requests are exclusive: acquire_all waits for a reader (and a
// later reader waits behind it), acquire_some takes the free name and
// queues for the read-held one.
TEST_P(ConformanceTest, Shared_MultiLockRequestsWaitForReaders) {
  BATON_REQUIRE_SHARED();
  const std::string a = lock_name("multi-a"), b = lock_name("multi-b");
  auto r = client().acquire_shared(a, 0ms, opts(30s, 1, "r"));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_FALSE(client().acquire_all({a, b}, 0ms, opts(30s)).ok())
      << "acquire_all was granted beside a reader";
  auto all = std::async(std::launch::async, [&] {
    return client().acquire_all({a, b}, 30s, opts(30s, 1, "all"));
  });
  ASSERT_TRUE(eventually([&] { return waiters_of(client(), a) == 1; }))
      << "acquire_all never showed up in the queue";
  EXPECT_EQ(modes(client(), a),
            std::make_pair(std::string("S"), std::string("X")));
  auto late = client().acquire_shared(a, 0ms, opts(30s));
  ASSERT_FALSE(late.ok()) << "a reader passed a waiting acquire_all";
  EXPECT_EQ(late.error().code(), Errc::not_acquired);
  EXPECT_EQ(all.wait_for(100ms), std::future_status::timeout);
  EXPECT_TRUE(*client().release(*r));
  auto got = all.get();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  ASSERT_EQ(got->size(), 2u);
  for (const auto& l : *got) {
    EXPECT_FALSE(l.shared);
    if (l.name == a) {
      EXPECT_GT(l.fencing_token, r->fencing_token);
    }
  }
  EXPECT_EQ(modes(client(), a),
            std::make_pair(std::string("X"), std::string()));
  for (const auto& l : *got) EXPECT_TRUE(*client().release(l));

  auto rb = client().acquire_shared(b, 0ms, opts(30s, 1, "rb"));
  ASSERT_TRUE(rb.ok()) << rb.error().to_string();
  const OwnerToken reservation = OwnerToken::random();
  auto some = client().acquire_some({a, b}, reservation, 300ms, opts(30s));
  ASSERT_TRUE(some.ok()) << some.error().to_string();
  ASSERT_EQ(some->size(), 1u);
  EXPECT_EQ((*some)[0].name, a);
  EXPECT_EQ(modes(client(), b),
            std::make_pair(std::string("S"), std::string("X")));
  EXPECT_TRUE(*client().release(*rb));
  auto rest = client().acquire_some({b}, reservation, 5s, opts(30s));
  ASSERT_TRUE(rest.ok()) << rest.error().to_string();
  ASSERT_EQ(rest->size(), 1u);
  EXPECT_EQ((*rest)[0].name, b);
  EXPECT_FALSE((*rest)[0].shared);
  EXPECT_GT((*rest)[0].fencing_token, rb->fencing_token);
  EXPECT_TRUE(*client().release((*some)[0]));
  EXPECT_TRUE(*client().release((*rest)[0]));
}

TEST_P(ConformanceTest, Shared_ListShowsModes) {
  BATON_REQUIRE_SHARED();
  const std::string name = lock_name("list");
  auto s = client().acquire_shared(name, 0ms, opts(30s, 1, "reader"));
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  auto l = client().list(prefix(), 10);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  ASSERT_EQ(l->size(), 1u);
  ASSERT_EQ((*l)[0].holders.size(), 1u);
  EXPECT_TRUE((*l)[0].holders[0].shared);
  EXPECT_EQ((*l)[0].holders[0].label, "reader");
  EXPECT_TRUE(*client().release(*s));
}

}  // namespace

// Referenced by conformance.cc (see there).
int kLinkSuiteShared = 0;

}  // namespace baton::conformance
