// tests/torture/checkers_store.cc — checker 10, the store's own exclusion
// (docs/reliability.md): did the store ever let more holders into a lock
// than its capacity at one instant of real time, judged from the grant
// records alone — before any fencing at the resource?
//
// A lease is (worker, lock, fencing token). The store surely held it on
// [from, to]:
//   from  its grant's completion (the store granted it by then);
//   to    the latest of: grant invoke + TTL (or the grant's own store
//         expiry, when earlier: etcd:// joins a grant to a lease of the
//         same length granted up to min(250 ms, TTL / 10) before the
//         call, and reports that lease's end — not with a server's clock
//         stepped, where the store's expiry is on another clock), each ok
//         extend's invoke + TTL
//         (a store sets expiry = its now + TTL when the call arrives, which
//         is after the invoke), and each safe deadline the worker's
//         LeaseKeeper logged (rule 14 puts it before the store's expiry),
//         less a slack of 2 ms + 1 % of the TTL (timer granularity, Redlock's
//         clock drift); cut at the first release invoked after the grant
//         (logged before it is sent, so one in flight when its worker was
//         killed counts too),
//         and at the worker's clean exit (closing its client ends what it
//         held: a zookeeper:// session's close deletes its nodes).
// Two leases of a mutex surely held at one instant — unless both are
// shared (rule 18) — or more than capacity of a semaphore, is a **store
// overlap**. No clock but the orchestrator's real clock is read: a server
// whose clock stepped forward and expired a lease early shows up here.
//
// Each overlap is also classed by what the older holders knew: **after
// notice** when, at the newer grant's completion, the holders over capacity
// had all been told their lease was lost (a `lost` notice: the store said
// lock_lost, or the safe deadline passed). The session gives a lost lease
// back right after its notice, which may free the lock before the expiry
// the store promised — the overlap is then the store's early loss (a false
// lock_lost, say), seen by no holder that still acted. **Before notice**
// is the dangerous kind: a holder that still believed it held. The count
// keeps both (an amnesiac master's overlap is often told at once: the
// holder's next renewal finds its lease gone).
//
// An overlap is a finding, not a failure: fencing exists for it. It is a
// violation (10-store-exclusion) only if the resource then accepted a write
// of the older lease after it had accepted one of the newer — the overlap
// reached the protected resource.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "torture.h"

namespace baton::torture {
namespace {

std::string in_ms(std::int64_t us) { return std::to_string(us / 1000) + " ms"; }

using Key = std::tuple<int, std::string, std::uint64_t>;  // worker lock token

struct Span {
  Key key;
  const Op* grant = nullptr;
  std::int64_t from = 0;
  std::int64_t to = 0;
  std::int64_t release_us = 0;  // first release invoked after the grant
};

int capacity_of(const std::string& lock) {
  for (const LockSpec& s : lock_specs()) {
    if (s.name == lock) return static_cast<int>(s.capacity);
  }
  return 1;
}

}  // namespace

Judged check_store_exclusion(const Options& o, const std::vector<Op>& ops,
                             const std::vector<Write>& writes,
                             const std::vector<Fault>& faults) {
  Judged out;
  const std::int64_t ttl_us = o.ttl.count() * 1000;
  const std::int64_t slack = 2000 + ttl_us / 100;
  std::map<Key, Span> spans;
  for (const Op& op : ops) {
    if (!is_grant(op) || op.complete_us == 0) continue;
    const Key k{op.worker, op.lock, op.fencing};
    Span& s = spans[k];
    // A repeat of one grant (rule 17) keeps the earliest.
    if (s.grant == nullptr || op.complete_us < s.grant->complete_us) {
      s.key = k;
      s.grant = &op;
      s.from = op.complete_us;
    }
  }
  for (auto& [k, s] : spans) {
    std::int64_t end = s.grant->invoke_us + ttl_us;
    const std::int64_t told = s.grant->expires_ms * 1000;
    if (told > 0 && told < end &&
        !server_clock_stepped(faults, s.grant->invoke_us,
                              s.grant->complete_us)) {
      end = told;
    }
    s.to = end - slack;
  }
  for (const Op& op : ops) {
    const auto it = spans.find({op.worker, op.lock, op.fencing});
    if (it == spans.end()) continue;
    Span& s = it->second;
    if (op.kind == "extend" && op.result == "ok") {
      s.to = std::max(s.to, op.invoke_us + ttl_us - slack);
    } else if (op.kind == "deadline" && op.complete_us > 0) {
      s.to = std::max(s.to, op.complete_us - slack);
    } else if ((op.kind == "release" || op.kind == "release_begin") &&
               op.invoke_us >= s.grant->invoke_us &&
               (s.release_us == 0 || op.invoke_us < s.release_us)) {
      s.release_us = op.invoke_us;
    }
  }
  // The first lost notice of each lease (the session gives it back next).
  std::map<Key, std::int64_t> told_lost;
  for (const Op& op : ops) {
    if (op.kind != "lost") continue;
    const Key k{op.worker, op.lock, op.fencing};
    const auto it = told_lost.find(k);
    if (it == told_lost.end() || op.invoke_us < it->second) {
      told_lost[k] = op.invoke_us;
    }
  }
  std::map<int, std::int64_t> exits;  // worker -> its clean exit
  for (const Op& op : ops) {
    if (op.kind == "exit") exits[op.worker] = op.invoke_us;
  }
  for (auto& [k, s] : spans) {
    const auto e = exits.find(std::get<0>(k));
    if (e != exits.end() && e->second >= s.grant->invoke_us &&
        (s.release_us == 0 || e->second < s.release_us)) {
      s.release_us = e->second;
    }
  }
  std::map<std::string, std::vector<const Span*>> by_lock;
  for (auto& [k, s] : spans) {
    if (s.release_us != 0) s.to = std::min(s.to, s.release_us);
    if (s.to > s.from) by_lock[std::get<1>(k)].push_back(&s);
  }
  // Accepted writes per (lock, token), in decision order.
  std::map<std::pair<std::string, std::uint64_t>, std::vector<std::int64_t>>
      accepted;
  for (const Write& w : writes) {
    if (w.accepted && w.verb == 'W') {
      accepted[{w.lock, w.fencing}].push_back(w.at_us);
    }
  }
  std::set<std::string> example_given;
  for (auto& [lock, list] : by_lock) {
    std::sort(list.begin(), list.end(),
              [](const Span* a, const Span* b) { return a->from < b->from; });
    const int cap = capacity_of(lock);
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Span& b = *list[i];  // the newer lease
      // The leases surely held when b was surely granted, and still at
      // some instant of b's span: those that overlap b.
      std::vector<const Span*> with;
      for (std::size_t j = 0; j < i; ++j) {
        const Span& a = *list[j];
        if (a.to <= b.from) continue;
        if (a.grant->shared && b.grant->shared) continue;
        with.push_back(&a);
      }
      if (static_cast<int>(with.size()) + 1 <= cap) continue;
      // The older leases whose holders had not been told of a loss yet;
      // the example names one of them when there is one.
      std::vector<const Span*> unaware;
      const Span* told = nullptr;  // the first told before b's completion
      for (const Span* a : with) {
        const auto t = told_lost.find(a->key);
        if (t == told_lost.end() || t->second > b.from) {
          unaware.push_back(a);
        } else if (told == nullptr) {
          told = a;
        }
      }
      // Then `with` has more leases than `unaware`: `told` is set.
      const bool after_notice = static_cast<int>(unaware.size()) + 1 <= cap;
      const Span& a = after_notice ? *told : *unaware.front();
      const std::int64_t start = b.from;
      const std::int64_t end = std::min(a.to, b.to);
      ++out.counts["store_overlaps"];
      ++out.counts[after_notice ? "store_overlaps_after_notice"
                                : "store_overlaps_before_notice"];
      // The faults that were on between the older grant and the overlap's
      // end: what the overlap is counted under.
      std::set<std::string> kinds;
      for (const Fault& f : faults) {
        if (f.kind.rfind("skip:", 0) == 0) continue;
        const std::int64_t f_end = f.end_us == 0 ? end : f.end_us;
        if (f.start_us <= end && f_end >= a.grant->invoke_us - ttl_us) {
          kinds.insert(f.kind);
        }
      }
      if (kinds.empty()) kinds.insert("none");
      std::string under;
      for (const std::string& kind : kinds) {
        ++out.counts["store_overlaps_under_" + kind];
        under += (under.empty() ? "" : ",") + kind;
      }
      const auto& [aw, al, at] = a.key;
      const auto& [bw, bl, bt] = b.key;
      std::string what =
          lock + ": worker " + std::to_string(bw) + " granted token " +
          std::to_string(bt) + " (invoked " + in_ms(b.grant->invoke_us) +
          ", completed " + in_ms(b.from) + ") while worker " +
          std::to_string(aw) + " surely still held token " +
          std::to_string(at) + " (granted " + in_ms(a.from) +
          ", held to at least " + in_ms(a.to) + "): " + in_ms(end - start) +
          " of overlap; faults: " + under;
      if (after_notice) {
        what += "; after notice: token " + std::to_string(at) +
                "'s holder was told " +
                std::to_string((b.from - told_lost.at(a.key)) / 1000) +
                " ms before that it was lost";
      }
      // Did the resource let the older holder act after the newer one?
      const auto& old_w = accepted[{lock, at}];
      const auto& new_w = accepted[{lock, bt}];
      const bool reached =
          !new_w.empty() && !old_w.empty() &&
          std::any_of(old_w.begin(), old_w.end(),
                      [&](std::int64_t t) { return t > new_w.front(); }) &&
          at < bt;
      if (reached) {
        ++out.counts["violations_10-store-exclusion"];
        out.violations.push_back(
            {"10-store-exclusion",
             what + "; the resource accepted the older holder's write after "
                    "the newer's"});
      } else if (example_given.insert(under).second) {
        out.findings.push_back(
            {"10-store-overlap", what + (old_w.empty() || new_w.empty()
                                             ? ""
                                             : "; fencing rejected the older "
                                               "holder's late writes")});
      }
    }
  }
  return out;
}

}  // namespace baton::torture
