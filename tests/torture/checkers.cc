// tests/torture/checkers.cc — the judges (docs/reliability.md, "Checkers").
// Checker 5 (recovery after faults stop) is measured live by run.cc.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "torture.h"

namespace baton::torture {
namespace {

std::string us(std::int64_t t) { return std::to_string(t / 1000) + " ms"; }

bool overlaps(std::int64_t a0, std::int64_t a1, std::int64_t b0,
              std::int64_t b1) {
  return a0 <= b1 && b0 <= a1;
}

class Judge {
 public:
  Judge(const Options& o, const std::vector<Op>& ops,
        const std::vector<Write>& writes, const std::vector<Fault>& faults)
      : o_(o), ops_(ops), writes_(writes), faults_(faults) {}

  void add(const std::string& checker, const std::string& what) {
    if (++per_checker_[checker] <= 20)
      out_.violations.push_back({checker, what});
  }

  // A fault aimed at this worker (pause, clock step) during [a, b].
  bool worker_disturbed(int worker, std::int64_t a, std::int64_t b) const {
    for (const Fault& f : faults_) {
      // A clock step takes effect, and is undone, up to 1 s late (the
      // libfaketime cache), and the stepped worker stamps its operations
      // with its own stepped clock (wall and monotonic), up to 5 s off the
      // orchestrator's: widen its window by both on each side.
      const std::int64_t slack = f.kind == "clock_step" ? 6'100'000 : 0;
      if (f.worker == worker && f.kind.rfind("skip:", 0) != 0 &&
          overlaps(a, b, f.start_us - slack, f.end_us + slack)) {
        return true;
      }
    }
    return false;
  }
  // Any fault (plus a settling time) during [a, b].
  bool any_fault(std::int64_t a, std::int64_t b) const {
    const std::int64_t settle = 2 * o_.ttl.count() * 1000 + 500'000;
    for (const Fault& f : faults_) {
      if (f.kind.rfind("skip:", 0) == 0) continue;
      if (overlaps(a, b, f.start_us, f.end_us + settle)) return true;
    }
    return false;
  }

  // (1) Accepted fencing tokens strictly increase per resource (equal only
  // for writes of the same grant); no token granted twice; a grant that
  // starts after another finished gets a larger token.
  void fencing() {
    std::map<std::string, const Write*> last;
    for (const Write& w : writes_) {
      if (w.verb == 'D') continue;  // reads: checker 9
      // The SQL helper saw a subset of these writes, so its highest token
      // is never above FencedResource's: it must accept what that accepts.
      if (w.sql != 0) ++out_.counts[std::string("sql_fenced_write_") + w.sql];
      if (w.accepted && w.sql == 'R') {
        add("1-fencing", w.lock + ": SQL fenced_write rejected token " +
                             std::to_string(w.fencing) +
                             " that FencedResource accepted");
      }
      if (!w.accepted) continue;
      ++out_.counts["writes_accepted"];
      const Write*& prev = last[w.lock];
      if (prev != nullptr &&
          (w.fencing < prev->fencing ||
           (w.fencing == prev->fencing && w.worker != prev->worker))) {
        add("1-fencing", w.lock + ": accepted token " +
                             std::to_string(w.fencing) + " (worker " +
                             std::to_string(w.worker) + ") after token " +
                             std::to_string(prev->fencing) + " (worker " +
                             std::to_string(prev->worker) + ")");
      }
      prev = &w;
    }
    std::map<std::pair<std::string, std::uint64_t>, const Op*> seen;
    std::map<std::string, std::vector<const Op*>> grants;
    for (const Op& o : ops_) {
      if (!is_grant(o)) continue;
      ++out_.counts["grants"];
      auto [it, fresh] = seen.insert({{o.lock, o.fencing}, &o});
      if (!fresh) {
        add("1-fencing",
            o.lock + ": token " + std::to_string(o.fencing) +
                " granted to worker " + std::to_string(it->second->worker) +
                " and again to worker " + std::to_string(o.worker));
      }
      grants[o.lock].push_back(&o);
    }
    for (auto& [lock, g] : grants) {
      std::sort(g.begin(), g.end(), [](const Op* a, const Op* b) {
        return a->complete_us < b->complete_us;
      });
      std::vector<std::uint64_t> prefix_max(g.size());
      for (std::size_t i = 0; i < g.size(); ++i) {
        prefix_max[i] = std::max(i ? prefix_max[i - 1] : 0, g[i]->fencing);
      }
      for (const Op* b : g) {
        // Grants completed strictly before b was invoked.
        auto end = std::lower_bound(
            g.begin(), g.end(), b->invoke_us,
            [](const Op* a, std::int64_t t) { return a->complete_us < t; });
        if (end == g.begin()) continue;
        const auto before =
            prefix_max[static_cast<std::size_t>(end - g.begin() - 1)];
        if (b->fencing <= before) {
          add("1-fencing", lock + ": worker " + std::to_string(b->worker) +
                               " granted token " + std::to_string(b->fencing) +
                               " at " + us(b->complete_us) + " after token " +
                               std::to_string(before) + " was already granted");
        }
      }
    }
  }

  // (2) Every acknowledged update is present exactly once: resource writes
  // by (worker, seq); store counter: distinct returned values and
  // acked <= final <= acked + uncertain.
  void exactly_once(std::int64_t final_value, bool known) {
    std::map<std::pair<int, std::uint64_t>, int> at_resource;
    for (const Write& w : writes_) {
      if (++at_resource[{w.worker, w.seq}] == 2) {
        add("2-exactly-once", "write " + std::to_string(w.worker) + "/" +
                                  std::to_string(w.seq) + " recorded twice");
      }
    }
    for (const Op& o : ops_) {
      if (o.kind != "write" || o.result != "accepted") continue;
      auto it = at_resource.find({o.worker, o.seq});
      if (it == at_resource.end()) {
        add("2-exactly-once", "acknowledged write " + std::to_string(o.worker) +
                                  "/" + std::to_string(o.seq) + " missing");
      }
    }
    std::int64_t begun = 0, acked = 0;
    std::map<std::int64_t, int> values;
    for (const Op& o : ops_) {
      if (o.kind == "counter_begin") ++begun;
      if (o.kind != "counter" || o.result != "ok") continue;
      ++acked;
      if (++values[o.wait_ms] == 2) {
        add("2-exactly-once", "two acknowledged adds returned value " +
                                  std::to_string(o.wait_ms));
      }
    }
    out_.counts["counter_acked"] = acked;
    out_.counts["counter_uncertain"] = begun - acked;
    out_.counts["counter_final"] = final_value;
    if (!o_.counters) {
      // redlock:// has no counters; the workers do not use them.
    } else if (!known) {
      add("2-exactly-once", "could not read the final counter value");
    } else if (final_value < acked || final_value > begun) {
      add("2-exactly-once",
          "counter is " + std::to_string(final_value) + " after " +
              std::to_string(acked) + " acknowledged and " +
              std::to_string(begun - acked) + " uncertain adds");
    }
  }

  // (3) No acquire returned a lease already expired in store time.
  void expired_grants() {
    for (const Op& o : ops_) {
      if (!is_grant(o)) continue;
      if (o.expires_ms * 1000 > o.complete_us) continue;
      if (worker_disturbed(o.worker, o.invoke_us, o.complete_us)) continue;
      // The store's clock was not the real one then: its expiry, on its
      // clock, is not comparable with real_us() (checker 10 judges what
      // the step did to exclusion).
      if (server_clock_stepped(faults_, o.invoke_us, o.complete_us)) {
        ++out_.counts["expired_grants_server_clock_stepped"];
        continue;
      }
      add("3-expired-grant", o.lock + ": worker " + std::to_string(o.worker) +
                                 " got token " + std::to_string(o.fencing) +
                                 " expiring at " +
                                 std::to_string(o.expires_ms) +
                                 " ms, returned at " + us(o.complete_us));
    }
  }

  // (4) No successful extend or release with a non-owner token.
  void non_owner() {
    for (const Op& o : ops_) {
      if (o.kind != "foreign_extend" && o.kind != "foreign_release") continue;
      ++out_.counts["foreign_attempts"];
      if (o.result == "ok") {
        add("4-non-owner", o.lock + ": " + o.kind + " by worker " +
                               std::to_string(o.worker) + " succeeded");
      }
    }
  }

  // (6) FIFO in fault-free windows: no blocking waiter is overtaken by a
  // grant to a request that arrived ≥ 100 ms later.
  //
  // Not judged as a waiter: a worker's first call. Its request reaches the
  // store only after the client's one-time setup (connections, Redis's
  // function library on every master, ZooKeeper's parent nodes), which
  // every worker does at once when the run starts, on a machine whose two
  // cores are then busiest; "waiting since the invoke" does not hold.
  void fifo() {
    constexpr std::int64_t kMargin = 100'000;
    std::map<int, std::int64_t> first_call;  // worker -> earliest invoke
    for (const Op& o : ops_) {
      auto [it, fresh] = first_call.try_emplace(o.worker, o.invoke_us);
      if (!fresh) it->second = std::min(it->second, o.invoke_us);
    }
    std::map<std::string, std::vector<const Op*>> waits, grants;
    for (const Op& o : ops_) {
      if (o.complete_us == 0 || any_fault(o.invoke_us, o.complete_us)) continue;
      if (o.kind == "acquire" && (o.result == "ok" || o.result == "timeout")) {
        if (o.invoke_us == first_call[o.worker]) {
          ++out_.counts["fifo_first_calls_not_judged"];
        } else {
          waits[o.lock].push_back(&o);
        }
      }
      if (is_grant(o)) grants[o.lock].push_back(&o);
    }
    for (auto& [lock, ws] : waits) {
      out_.counts["fifo_waits_judged"] += static_cast<std::int64_t>(ws.size());
      for (const Op* a : ws) {
        // A waiter that timed out waited until its wait ended, not until
        // it returned: its request is withdrawn at the end of the wait,
        // and the withdrawal's round trips (slow on a loaded machine) may
        // let the next request in before the call returns.
        const std::int64_t waited_until =
            a->result == "timeout"
                ? std::min(a->complete_us, a->invoke_us + a->wait_ms * 1000)
                : a->complete_us;
        for (const Op* b : grants[lock]) {
          if (b->invoke_us > a->invoke_us + kMargin &&
              b->complete_us + kMargin < waited_until) {
            add("6-fifo",
                lock + ": worker " + std::to_string(a->worker) +
                    " waiting since " + us(a->invoke_us) +
                    " overtaken by worker " + std::to_string(b->worker) + " (" +
                    b->kind + ", asked at " + us(b->invoke_us) +
                    ", granted at " + us(b->complete_us) + "); waiter got " +
                    a->result + " at " + us(a->complete_us) +
                    " (its CPU wait " + std::to_string(a->aux / 1000) + " ms)");
            break;
          }
        }
      }
    }
  }

  // (7) No acquire (or acquire_all) with a wait returned later than
  // wait + 100 ms.
  void deadlines() {
    std::set<std::pair<int, std::int64_t>> judged;  // one per multi call
    for (const Op& o : ops_) {
      const bool multi = o.kind == "multi" && o.wait_ms > 0;
      if ((o.kind != "acquire" && !multi) || o.complete_us == 0) continue;
      if (multi && !judged.insert({o.worker, o.invoke_us}).second) continue;
      const std::int64_t took = o.complete_us - o.invoke_us;
      if (took <= (o.wait_ms + 100) * 1000) continue;
      if (worker_disturbed(o.worker, o.invoke_us, o.complete_us)) continue;
      // The worker's process, or the call's threads, waited o.aux µs for
      // a CPU meanwhile (its starvation probe and the kernel's run-queue
      // times, starvation.h): that much of the delay is the machine's, not
      // the library's. Counted, not judged.
      if (took - o.aux <= (o.wait_ms + 100) * 1000) {
        ++out_.counts["late_acquires_starved"];
        continue;
      }
      // Reported either way; counted apart when no fault was near.
      if (!any_fault(o.invoke_us, o.complete_us)) {
        ++out_.counts["late_acquires_fault_free"];
      }
      add("7-deadline", o.lock + ": worker " + std::to_string(o.worker) +
                            " acquire with wait " + std::to_string(o.wait_ms) +
                            " ms returned " + o.result + " after " +
                            std::to_string(took / 1000) + " ms (CPU " +
                            "wait " + std::to_string(o.aux / 1000) +
                            " ms; at " + us(o.complete_us) + ")");
    }
  }

  // (9) Read-write locks (rule 18): no read by a shared holder is accepted
  // while a write is in progress (unless a fault hit the writer during its
  // write: a paused or killed writer's lease may end mid-write, which only
  // fencing can catch), and no shared holder writes.
  void read_write() {
    // The last store expiry each lease was known to have (grant, ok extend,
    // keeper renewal), on real_us()'s clock in ms.
    std::map<std::tuple<int, std::string, std::uint64_t>, std::int64_t> expiry;
    // The latest safe deadline each lease was given (rule 14: its "deadline"
    // lines; real_us()'s clock in µs).
    std::map<std::tuple<int, std::string, std::uint64_t>, std::int64_t>
        safe_end;
    for (const Op& o : ops_) {
      if (o.kind == "deadline") {
        auto& d = safe_end[{o.worker, o.lock, o.fencing}];
        d = std::max(d, o.complete_us);
      }
      const bool known = is_grant(o) || o.kind == "deadline" ||
                         (o.kind == "extend" && o.result == "ok");
      if (!known || o.expires_ms <= 0) continue;
      auto& e = expiry[{o.worker, o.lock, o.fencing}];
      e = std::max(e, o.expires_ms);
    }
    for (const Write& w : writes_) {
      if (w.verb == 'W' && w.accepted && w.shared_writer) {
        add("9-shared-write", w.lock + ": worker " + std::to_string(w.worker) +
                                  " wrote with token " +
                                  std::to_string(w.fencing) +
                                  " that a shared holder read with");
      }
      if (w.verb != 'D') continue;
      ++out_.counts[w.accepted ? "reads_accepted" : "reads_rejected"];
      if (!w.accepted || w.writer < 0) continue;
      if (worker_disturbed(w.writer, w.write_begun_us, w.at_us)) {
        ++out_.counts["reads_during_disturbed_write"];
        continue;
      }
      // The writer's lease had ended before the read (its last known
      // expiry): the write outlived its lease — its writer was killed
      // before its "E", or the write was held up, e.g. in the resource's
      // own SQL fenced_write while the store was frozen. The store kept
      // rule 18 (the reader came after the writer's lease); a stale write
      // is fencing's case, judged by checkers 1 and 8a.
      const auto e = expiry.find({w.writer, w.lock, w.writer_token});
      if (e != expiry.end() && w.at_us > e->second * 1000) {
        ++out_.counts["reads_after_writer_lease_ended"];
        continue;
      }
      // The read came after the writer's safe deadline: its write began
      // in time but outlasted the lease's local end, and past that end the
      // keeper gives the lease back (a grant that arrived late leaves
      // little of the TTL: rule 14 counts the lease from the request's
      // send). The lease ended mid-write: fencing's case, as above.
      const auto d = safe_end.find({w.writer, w.lock, w.writer_token});
      if (d != safe_end.end() && w.at_us > d->second) {
        ++out_.counts["reads_after_writer_deadline"];
        continue;
      }
      add("9-read-during-write",
          w.lock + ": worker " + std::to_string(w.worker) +
              " read with token " + std::to_string(w.fencing) + " at " +
              us(w.at_us) + " while worker " + std::to_string(w.writer) +
              "'s write with token " + std::to_string(w.writer_token) +
              " (begun " + us(w.write_begun_us) + ") was in progress");
    }
  }

  Judged done() {
    for (auto& [c, n] : per_checker_) out_.counts["violations_" + c] = n;
    out_.counts["ops"] = static_cast<std::int64_t>(ops_.size());
    return std::move(out_);
  }

 private:
  const Options& o_;
  const std::vector<Op>& ops_;
  const std::vector<Write>& writes_;
  const std::vector<Fault>& faults_;
  std::map<std::string, int> per_checker_;
  Judged out_;
};

}  // namespace

Judged check_all(const Options& options, const std::vector<Op>& ops,
                 const std::vector<Write>& writes,
                 const std::vector<Fault>& faults, std::int64_t counter_final,
                 bool counter_known) {
  Judge j(options, ops, writes, faults);
  j.fencing();
  j.exactly_once(counter_final, counter_known);
  j.expired_grants();
  j.non_owner();
  j.fifo();
  j.deadlines();
  j.read_write();
  Judged h = check_holder(options, ops, faults);
  for (const Violation& v : h.violations) j.add(v.checker, v.what);
  Judged e = check_store_exclusion(options, ops, writes, faults);
  for (const Violation& v : e.violations) j.add(v.checker, v.what);
  Judged out = j.done();
  // violations_8* and _10* are counted by j.add above.
  for (const Judged* part : {&h, &e}) {
    for (auto& [k, v] : part->counts) {
      if (k.rfind("violations_", 0) != 0) out.counts[k] += v;
    }
  }
  out.findings = std::move(e.findings);
  return out;
}

}  // namespace baton::torture
