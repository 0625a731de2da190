// tests/server/baton_store_test.cc — the baton:// store's own primitives
// against the conformance_baton binary's batond (baton_test_server.h):
// what its Requests answer, and how a stop ends an ask that batond parked.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>

#include "baton/store.h"
#include "baton/store_descriptor.h"
#include "baton_test_server.h"
#include "eventually.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Store> admin() {
  auto s = open_store(baton_url());
  if (!s) throw std::runtime_error(s.error().to_string());
  return std::move(*s);
}

AcquireSpec spec_of(const std::string& name) {
  AcquireSpec a;
  a.name = name;
  a.token = OwnerToken::random();
  a.ttl = 30s;
  a.label = "baton-store-test";
  return a;
}

std::size_t waiters(Store& s, const std::string& name) {
  auto info = s.describe(name, CallContext());
  return info ? info->waiters.size() : 99;
}

// A waiting ask as the engine runs it: batond answers `queued` first
// (LOCK.ACQUIRE … QUEUED), then look() reads its final answer.
Result<Answer> ask_and_look(Request& req, std::chrono::milliseconds wait) {
  auto a = req.ask(AskMode::wait, wait, CallContext());
  if (!a || a->kind != Answer::Kind::queued) return a;
  EXPECT_GE(a->position, 1u) << "batond's queued answer names the place";
  EXPECT_EQ(a->look_at, Clock::time_point::min());
  return req.look(wait, CallContext());
}

// A wait batond runs out answers `expired` with nothing left of the
// request; a try on a held lock is refused with its holders.
TEST(BatonStore, AskAnswersWhatBatondDecided) {
  auto s = admin();
  const AcquireSpec held = spec_of("store/answers");
  auto g = s->request(held)->ask(AskMode::try_only, 0ms, CallContext());
  ASSERT_TRUE(g) << g.error().to_string();
  ASSERT_EQ(g->kind, Answer::Kind::granted);
  EXPECT_EQ(g->grant.token, held.token);
  EXPECT_GT(g->grant.valid_for, 29s);

  auto busy = s->request(spec_of("store/answers"))
                  ->ask(AskMode::try_only, 0ms, CallContext());
  ASSERT_TRUE(busy) << busy.error().to_string();
  EXPECT_EQ(busy->kind, Answer::Kind::refused);
  EXPECT_EQ(busy->error.code(), Errc::not_acquired);
  EXPECT_EQ(busy->error.holders().size(), 1u);
  EXPECT_TRUE(busy->gone);

  auto ran_out = ask_and_look(*s->request(spec_of("store/answers")), 100ms);
  ASSERT_TRUE(ran_out) << ran_out.error().to_string();
  EXPECT_EQ(ran_out->kind, Answer::Kind::expired);
  EXPECT_TRUE(ran_out->gone);
  EXPECT_EQ(waiters(*s, "store/answers"), 0u);
  ASSERT_TRUE(s->release(held.name, held.token, CallContext()));
}

// A stop during an ask that batond parked ends it at once, also when the
// stop comes right after the ask was sent (the withdrawing release may then
// reach batond before the acquire, and is repeated) or between the queued
// answer and the look, and leaves nothing queued.
TEST(BatonStore, AStopEndsAParkedAskAndLeavesNoWaiter) {
  auto s = admin();
  const std::string name = "store/parked";
  const AcquireSpec held = spec_of(name);
  ASSERT_TRUE(s->request(held)->ask(AskMode::try_only, 0ms, CallContext()));
  for (int i = 0; i < 20; ++i) {
    auto req = s->request(spec_of(name));
    auto asked =
        std::async(std::launch::async, [&] { return ask_and_look(*req, 30s); });
    if (i % 2 == 1) {
      // Half the rounds: once batond has parked the request.
      ASSERT_TRUE(eventually([&] { return waiters(*s, name) == 1; }));
    }
    req->interrupt();
    // Far less than the 30 s the ask asked batond to wait.
    ASSERT_EQ(asked.wait_for(5s), std::future_status::ready) << "round " << i;
    auto a = asked.get();
    ASSERT_TRUE(a) << a.error().to_string();
    EXPECT_EQ(a->kind, Answer::Kind::refused) << "round " << i;
    EXPECT_EQ(a->error.code(), Errc::not_acquired) << a->error.to_string();
    EXPECT_TRUE(a->gone);
    EXPECT_TRUE(eventually([&] { return waiters(*s, name) == 0; }))
        << "round " << i << ": a withdrawn request stayed queued";
  }
  ASSERT_TRUE(s->release(held.name, held.token, CallContext()));
}

// The options of the shared vocabulary, and the older spellings.
TEST(BatonStore, OptionsOfTheSharedVocabularyAndTheirOlderSpellings) {
  const std::string base = baton_url();
  for (const std::string q :
       {"?request_timeout=2s", "?timeout_ms=2000", "?RequestTimeout=2000ms",
        "?max_idle_connections=2", "?pool=2"}) {
    auto s = open_store(base + q);
    ASSERT_TRUE(s) << q << ": " << s.error().to_string();
    EXPECT_TRUE((*s)->describe("store/options", CallContext())) << q;
  }
  auto unknown = open_store(base + "?timeout=2s");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message().find("unknown option \"timeout\""),
            std::string::npos)
      << unknown.error().message();
  auto twice = open_store(base + "?timeout_ms=1&request_timeout=2s");
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message().find("given twice"), std::string::npos)
      << twice.error().message();
}

}  // namespace
}  // namespace baton::testing
