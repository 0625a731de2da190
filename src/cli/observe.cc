// cli/observe.cc — --metrics-file and --events of run and elect.
#include "cli/observe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "baton/metrics.h"
#include "cli/cli.h"

namespace baton::cli {

namespace {

Error bad_path(std::string_view flag, const std::string& path,
               const std::string& why) {
  return Error(Errc::invalid_argument,
               std::string(flag) + " " + path + ": " + why);
}

// The directory a file `path` would be created in.
std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Can write_file() put `path` in place? Creates and removes the temporary
// file it would use.
Status probe_metrics_file(const std::string& path) {
  if (path.empty() || path.back() == '/') {
    return bad_path("--metrics-file", path, "not a file name");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return bad_path("--metrics-file", path, "is a directory");
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    return bad_path("--metrics-file", path,
                    "cannot create a file in " + directory_of(path) + ": " +
                        std::strerror(err));
  }
  ::close(fd);
  ::unlink(tmp.c_str());
  return {};
}

// Two observers or more, called in turn.
class Fanout final : public Observer {
 public:
  explicit Fanout(std::vector<std::shared_ptr<Observer>> to)
      : to_(std::move(to)) {}
  void on_event(const Event& event) override {
    for (const auto& o : to_) {
      try {
        o->on_event(event);
      } catch (...) {  // one observer's failure does not starve the next
      }
    }
  }

 private:
  std::vector<std::shared_ptr<Observer>> to_;
};

// JSON lines to a file descriptor, one write(2) each.
class EventLog final : public Observer {
 public:
  EventLog(int fd, bool owned) : fd_(fd), owned_(owned) {}
  ~EventLog() override {
    if (owned_) ::close(fd_);
  }
  void on_event(const Event& event) override {
    const auto now = std::chrono::system_clock::now();
    const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             now.time_since_epoch())
                             .count();
    const std::string line = event_json(event, ms) + "\n";
    // Best effort: a full disk must not stop the lock's work.
    const ssize_t n = ::write(fd_, line.data(), line.size());
    (void)n;
  }

 private:
  int fd_;
  bool owned_;
};

// Hex runs as long as an owner token (32 digits) are cut out of error
// messages: the events never show one, whatever a store's message says.
std::string without_tokens(std::string_view message) {
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    std::size_t j = i;
    while (j < message.size() &&
           std::isxdigit(static_cast<unsigned char>(message[j])) != 0) {
      ++j;
    }
    if (j - i >= 32) {
      out += "<token>";
    } else {
      out.append(message.substr(i, j - i));
    }
    if (j < message.size()) out += message[j];
    i = j + 1;
  }
  return out;
}

std::string rfc3339(long long unix_ms) {
  const std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[96];  // room for any int the format could meet
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03lldZ",
                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                tm.tm_min, tm.tm_sec, unix_ms % 1000);
  return buf;
}

}  // namespace

std::string event_json(const Event& e, long long unix_ms) {
  std::string j = "{\"ts\":\"" + rfc3339(unix_ms) + "\",\"event\":\"" +
                  std::string(to_string(e.kind)) +
                  "\",\"lock\":" + json_string(e.lock);
  auto number = [&j](const char* key, long long v) {
    j += ",\"";
    j += key;
    j += "\":" + std::to_string(v);
  };
  if (e.lease != nullptr) {
    number("fencing_token", static_cast<long long>(e.lease->fencing_token));
    number("ttl_ms", e.lease->ttl.count());
  }
  if (e.shared) j += ",\"shared\":true";
  switch (e.kind) {
    case EventKind::granted:
    case EventKind::not_acquired:
    case EventKind::timed_out:
    case EventKind::cancelled:
    case EventKind::failed:
      number("waited_us", e.waited.count());
      break;
    case EventKind::released:
    case EventKind::lost:
    case EventKind::stopped_leading:
      number("held_us", e.held.count());
      break;
    default:
      break;
  }
  if (e.kind == EventKind::wait_started && e.queue_position) {
    number("queue_position", static_cast<long long>(*e.queue_position));
  }
  if (e.kind == EventKind::lost) {
    j += e.lost_reason == LostReason::deadline_passed
             ? ",\"reason\":\"deadline_passed\""
             : ",\"reason\":\"store_said\"";
  }
  if (e.kind == EventKind::renewal_failed) {
    j += e.retryable ? ",\"retryable\":true" : ",\"retryable\":false";
  }
  if (e.kind == EventKind::new_leader) {
    j += ",\"leader\":" + json_string(e.leader_label);
  }
  if (e.error != nullptr) {
    j += ",\"error\":{\"code\":\"" + std::string(errc_name(e.error->code())) +
         "\",\"message\":" + json_string(without_tokens(e.error->message())) +
         "}";
  }
  j += '}';
  return j;
}

void add_observe_flags(CLI::App* sub, ObserveFlags& flags) {
  sub->add_option("--metrics-file", flags.metrics_file,
                  "When the command ends, write the client's lock metrics "
                  "here (Prometheus text format; atomically, for "
                  "node_exporter's textfile collector)");
  sub->add_option("--events", flags.events,
                  "Append one JSON line per lock event (granted, renewed, "
                  "lost, ...) to this file; - = stderr");
}

Result<std::unique_ptr<Observation>> Observation::open(
    const ObserveFlags& flags) {
  std::unique_ptr<Observation> o(new Observation());
  std::vector<std::shared_ptr<Observer>> observers;
  if (!flags.metrics_file.empty()) {
    if (Status s = probe_metrics_file(flags.metrics_file); !s) {
      return s.error();
    }
    o->metrics_path_ = flags.metrics_file;
    o->metrics_ = std::make_shared<PrometheusMetrics>();
    observers.push_back(o->metrics_);
  }
  if (flags.events == "-") {
    observers.push_back(std::make_shared<EventLog>(STDERR_FILENO, false));
  } else if (!flags.events.empty()) {
    const int fd = ::open(flags.events.c_str(),
                          O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int err = errno;
      return bad_path(
          "--events", flags.events,
          std::string("cannot open it for appending: ") + std::strerror(err));
    }
    observers.push_back(std::make_shared<EventLog>(fd, true));
  }
  if (observers.size() == 1) {
    o->observer_ = observers.front();
  } else if (observers.size() > 1) {
    o->observer_ = std::make_shared<Fanout>(std::move(observers));
  }
  if (o->metrics_) {
    Observation* self = o.get();
    set_exit_hook([self] { self->finish(); });
  }
  return o;
}

Observation::~Observation() {
  if (metrics_) set_exit_hook(nullptr);
  finish();
}

void Observation::finish() {
  if (!metrics_ || finished_) return;
  finished_ = true;
  if (Status s = metrics_->write_file(metrics_path_); !s) report(s.error());
}

}  // namespace baton::cli
