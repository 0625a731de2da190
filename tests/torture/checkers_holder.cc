// tests/torture/checkers_holder.cc — checker 8: CONTRACT rules 13 and 14 on
// the holder's side (docs/reliability.md, "Checker 8"). Judged on the
// leases a worker keeps with a LeaseKeeper (worker.cc, hold_with_keeper),
// whose log has the safe deadline on real_us() at the grant and at each
// renewal, the lost notice (on_lost, lost() read true) and the check before
// each write. Manual holds (write first, check after) are fencing's case
// and are not judged here.
//
//   8a-holder-deadline  a write of a keeper-held lease was sent at or after
//                       the safe deadline in force at the worker's check
//                       before it; or a safe deadline later than the
//                       store's own expiry of the lease (rule 14; not on
//                       redlock://, which reports one instance's expiry)
//   8b-notice-order     a lost notice later than a grant of the same lock to
//                       another worker that completed after the lease's
//                       own grant, with more than capacity holders then
//                       (two shared holds of one lock never conflict)
//   8c-notice-late      the worker found its safe deadline passed ≥ 100 ms
//                       ago and still no notice
// A SIGSTOP of the holder (pause_holder) in the interval judged excuses it.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "torture.h"

namespace baton::torture {
namespace {

std::string ms(std::int64_t us) { return std::to_string(us / 1000) + " ms"; }

using Key = std::tuple<int, std::string, std::uint64_t>;  // worker lock token

struct Held {
  const Op* grant = nullptr;
  std::vector<const Op*> deadlines;  // observation order
  std::vector<const Op*> writes;
  std::vector<const Op*> passed;  // deadline_passed checks
  std::int64_t notice_us = 0;     // first lost / lost_seen; 0 = none
  std::string notice_why;
  std::int64_t release_us = 0;  // release invoked
  // Times at which the store surely still held the lease (for semaphores):
  // a renewal's send time, an ok extend's or release's invoke.
  std::vector<std::int64_t> live;
};

class HolderJudge {
 public:
  HolderJudge(const Options& o, const std::vector<Op>& ops,
              const std::vector<Fault>& faults)
      : o_(o), faults_(faults) {
    for (const Op& op : ops) {
      const Key k{op.worker, op.lock, op.fencing};
      if (is_grant(op)) {
        leases_[k].grant = &op;
        grants_[op.lock].push_back(&op);
      } else if (op.kind == "deadline") {
        leases_[k].deadlines.push_back(&op);
        kept_.insert(k);
      } else if (op.kind == "write") {
        leases_[k].writes.push_back(&op);
      } else if (op.kind == "deadline_passed") {
        leases_[k].passed.push_back(&op);
      } else if (op.kind == "lost" || op.kind == "lost_seen") {
        Held& h = leases_[k];
        if (h.notice_us == 0 || op.invoke_us < h.notice_us) {
          h.notice_us = op.invoke_us;
          if (op.kind == "lost") h.notice_why = op.result;
        }
      } else if (op.kind == "release") {
        leases_[k].release_us = op.invoke_us;
        if (op.result == "ok") leases_[k].live.push_back(op.invoke_us);
      } else if (op.kind == "extend" && op.result == "ok") {
        leases_[k].live.push_back(op.invoke_us);
      }
    }
    for (auto& [k, h] : leases_) {
      for (const Op* d : h.deadlines) {
        if (d->result == "renew") {
          // deadline = send + TTL − drift, so send ≥ deadline − TTL.
          h.live.push_back(d->complete_us - o_.ttl.count() * 1000);
        }
      }
    }
    for (auto& [lock, v] : grants_) {
      std::sort(v.begin(), v.end(), [](const Op* a, const Op* b) {
        return a->complete_us < b->complete_us;
      });
    }
  }

  // The holder was SIGSTOPped at some time in [a, b].
  bool paused(int worker, std::int64_t a, std::int64_t b) const {
    for (const Fault& f : faults_) {
      if (f.kind == "pause_holder" && f.worker == worker && a <= f.end_us &&
          f.start_us <= b) {
        return true;
      }
    }
    return false;
  }

  // The worker's wall clock was stepped at some time in [a, b], widened by
  // the step's size and libfaketime's 1 s cache (as checkers.cc does).
  bool stepped(int worker, std::int64_t a, std::int64_t b) const {
    constexpr std::int64_t kSlack = 6'100'000;
    for (const Fault& f : faults_) {
      if (f.kind == "clock_step" && f.worker == worker &&
          a <= f.end_us + kSlack && f.start_us - kSlack <= b) {
        return true;
      }
    }
    return false;
  }

  void run() {
    for (const Key& k : kept_) {
      const Held& h = leases_[k];
      ++counts_["keeper_leases"];
      if (h.notice_us != 0) ++counts_["keeper_notices"];
      deadlines(k, h);
      order(k, h);
    }
  }

  Judged done() {
    for (auto& [c, n] : per_) counts_["violations_" + c] = n;
    return {std::move(violations_), std::move(counts_), {}};
  }

 private:
  void add(const std::string& checker, const std::string& what) {
    ++per_[checker];
    violations_.push_back({checker, what});
  }
  std::string who(const Key& k) const {
    return std::get<1>(k) + ": worker " + std::to_string(std::get<0>(k)) +
           " (token " + std::to_string(std::get<2>(k)) + ")";
  }

  // 8a and 8c.
  void deadlines(const Key& k, const Held& h) {
    const int worker = std::get<0>(k);
    for (const Op* d : h.deadlines) {
      // Rule 14: the client's safe deadline never lies beyond the store's
      // expiry of the lease. One machine, one clock: the store's expiry
      // (ms, its CLOCK_REALTIME) is on real_us(). 2 ms for the ms
      // granularity and for reading two clocks in the conversion.
      // Not on redlock://: its store_expires_at_ms is the first granting
      // instance's expiry, while the lease holds on a quorum until the
      // quorum's q-th largest validity (RedlockStore::finish), later.
      if (o_.store_kind == "redlock" || d->expires_ms <= 0) continue;
      // etcd:// has no clock a client can read: it reports the expiry on
      // the client's own wall clock (valid_for added to it), which a step
      // moves by the step. The lease and its safe deadline are on the
      // monotonic clock and unaffected; only this report is.
      if ((o_.store_kind == "etcd" || o_.store_kind == "etcds") &&
          stepped(worker, d->invoke_us, d->complete_us)) {
        ++counts_["keeper_deadlines_stepped_client_clock"];
        continue;
      }
      // A stepped server clock: the store's expiry is reported on it.
      if (server_clock_stepped(faults_, d->invoke_us, d->complete_us)) {
        ++counts_["keeper_deadlines_stepped_server_clock"];
        continue;
      }
      ++counts_["keeper_deadlines_judged"];
      if (d->complete_us > d->expires_ms * 1000 + 2000) {
        add("8a-holder-deadline",
            who(k) + ": safe deadline at " + ms(d->complete_us) + " is " +
                std::to_string((d->complete_us - d->expires_ms * 1000) / 1000) +
                " ms past the store's expiry (" + d->result + ")");
      }
    }
    for (const Op* w : h.writes) {
      ++counts_["keeper_writes_judged"];
      const std::int64_t checked = w->aux != 0 ? w->aux : w->invoke_us;
      // The deadline in force at the check: the last one seen by then.
      const Op* in_force = nullptr;
      for (const Op* d : h.deadlines) {
        if (d->invoke_us <= checked) in_force = d;
      }
      if (in_force == nullptr) continue;
      const std::int64_t dl = in_force->complete_us;
      if (w->invoke_us >= dl && !paused(worker, checked, w->invoke_us)) {
        add("8a-holder-deadline", who(k) + ": write " + std::to_string(w->seq) +
                                      " sent at " + ms(w->invoke_us) + ", " +
                                      ms(w->invoke_us - dl) +
                                      " after its safe deadline " + ms(dl) +
                                      " (checked at " + ms(checked) + ")");
      }
    }
    for (const Op* p : h.passed) {
      const std::int64_t dl = p->aux;
      const bool noticed = h.notice_us != 0 && h.notice_us <= p->invoke_us;
      if (!noticed && dl != 0 && p->invoke_us >= dl + 100'000 &&
          !paused(worker, dl, p->invoke_us)) {
        add("8c-notice-late", who(k) + ": safe deadline " + ms(dl) +
                                  " passed " + ms(p->invoke_us - dl) +
                                  " before the check at " + ms(p->invoke_us) +
                                  ", no lost notice yet");
      }
    }
  }

  // 8b: the lease's notice (at n) against the grants of its lock to other
  // workers that completed at t in (own grant, n) — before a release.
  void order(const Key& k, const Held& h) {
    if (h.notice_us == 0 || h.grant == nullptr) return;
    const auto& [worker, lock, token] = k;
    const std::int64_t g = h.grant->complete_us;
    std::int64_t end = h.notice_us;
    if (h.release_us != 0 && h.release_us < end) return;  // released first
    // A keeper that took the lease over after its safe deadline (the
    // worker was held up between the grant and the keeper) could not have
    // warned in time: not the library's case.
    if (!h.deadlines.empty() &&
        h.deadlines.front()->invoke_us >= h.deadlines.front()->complete_us) {
      ++counts_["keeper_started_late"];
      return;
    }
    if (paused(worker, g, end)) {
      ++counts_["keeper_notices_excused_paused"];
      return;
    }
    // A server's clock stepped ahead ends the lease in the store before
    // the holder's deadline, and no holder can see that (the critique of
    // Redlock's clocks): checker 10 counts the store's overlap, fencing
    // is what keeps the resource safe.
    if (server_clock_stepped(faults_, g, end)) {
      ++counts_["keeper_notices_excused_server_clock"];
      return;
    }
    ++counts_["keeper_notices_judged"];
    const auto it = grants_.find(lock);
    if (it == grants_.end()) return;
    for (const Op* other : it->second) {
      const std::int64_t t = other->complete_us;
      if (t <= g || other->worker == worker) continue;
      if (t >= end) break;
      // Two shared (read) holds of one lock coexist (rule 18): the other
      // grant did not need this lease to end. (Shared requests at the
      // head are granted together, and their replies complete in any
      // order.)
      if (other->shared && h.grant->shared) continue;
      // Holders at t: this lease, the new grant, and every other lease of
      // the lock the store surely still held at t.
      int holders = 2;
      for (const Op* third : it->second) {
        if (third == other || third->complete_us > t) continue;
        if (third->worker == worker && third->fencing == token) continue;
        const auto l = leases_.find({third->worker, lock, third->fencing});
        if (l == leases_.end()) continue;
        const auto& live = l->second.live;
        if (std::any_of(live.begin(), live.end(),
                        [t](std::int64_t x) { return x >= t; })) {
          ++holders;
        }
      }
      if (holders > capacity(lock)) {
        add("8b-notice-order",
            who(k) + ": lost notice at " + ms(end) + " (" +
                (h.notice_why.empty() ? "lost() read true" : h.notice_why) +
                ") came " + ms(end - t) + " after worker " +
                std::to_string(other->worker) +
                " was granted the lock (token " +
                std::to_string(other->fencing) + ", completed at " + ms(t) +
                "; " + std::to_string(holders) + " holders)");
        return;  // one per lease
      }
    }
  }

  int capacity(const std::string& lock) const {
    for (const LockSpec& s : lock_specs()) {
      if (s.name == lock) return static_cast<int>(s.capacity);
    }
    return 1;
  }

  const Options& o_;
  const std::vector<Fault>& faults_;
  std::map<Key, Held> leases_;
  std::set<Key> kept_;
  std::map<std::string, std::vector<const Op*>> grants_;
  std::map<std::string, int> per_;
  std::vector<Violation> violations_;
  std::map<std::string, std::int64_t> counts_;
};

}  // namespace

Judged check_holder(const Options& options, const std::vector<Op>& ops,
                    const std::vector<Fault>& faults) {
  HolderJudge j(options, ops, faults);
  j.run();
  return j.done();
}

}  // namespace baton::torture
