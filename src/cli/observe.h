// cli/observe.h — `--metrics-file PATH` and `--events PATH|-` of `baton run`
// and `baton elect` (docs/cli.md): the client's observer events
// (baton/observer.h) as a Prometheus textfile written when the command ends,
// and as JSON lines while it runs.
//
// The metrics file is written atomically (baton::PrometheusMetrics::
// write_file: a temporary file in the same directory, fsync, rename) when
// the Observation ends — on every way out of run and elect, including the
// ones that end the process at once (exit_now, a store that does not
// answer), through the CLI's exit hook (cli.h). Not when baton itself is
// killed.
//
// Each event line is one JSON object written with one write(2) to a file
// opened for appending (or stderr for "-"), so lines of several processes
// sharing a file do not mix. It never holds an owner token or a password.
//
// Thread safety: the observer is called from the client's threads at once;
// open() and the destructor run on the main thread.
#ifndef BATON_CLI_OBSERVE_H_
#define BATON_CLI_OBSERVE_H_

#include <memory>
#include <string>

#include "baton/error.h"
#include "baton/observer.h"

namespace CLI {
class App;
}

namespace baton {
class PrometheusMetrics;
}

namespace baton::cli {

struct ObserveFlags {
  std::string metrics_file;  // --metrics-file: "" = none
  std::string events;        // --events: "" = none, "-" = stderr
};

// Adds --metrics-file and --events to `sub`.
void add_observe_flags(CLI::App* sub, ObserveFlags& flags);

// One JSON object (no newline) for `event` at wall-clock time `unix_ms`:
// {"ts":"2026-11-25T10:00:00.123Z","event":"granted","lock":"jobs/a",
//  "fencing_token":7,"waited_us":12040,...}.
std::string event_json(const Event& event, long long unix_ms);

class Observation {
 public:
  // Checks the flags before anything is taken: a file can be created in
  // the metrics file's directory (one is created and removed), the events
  // file opens for appending. invalid_argument naming the flag and path.
  static Result<std::unique_ptr<Observation>> open(const ObserveFlags& flags);
  // Writes the metrics file (finish()) and clears the exit hook.
  ~Observation();
  Observation(const Observation&) = delete;
  Observation& operator=(const Observation&) = delete;

  // For ClientOptions::observer; null when neither flag is given.
  std::shared_ptr<Observer> observer() const { return observer_; }
  // Writes the metrics file the first time it is called; a failure is
  // reported on stderr ("baton: ...: metrics file PATH: ...").
  void finish();

 private:
  Observation() = default;

  std::string metrics_path_;
  std::shared_ptr<PrometheusMetrics> metrics_;
  std::shared_ptr<Observer> observer_;
  bool finished_ = false;
};

}  // namespace baton::cli

#endif  // BATON_CLI_OBSERVE_H_
