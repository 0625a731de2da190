// tests/support/stores/serve_main.cc — baton_test_servers: private servers
// of one store kind for tests in other languages (pytest fixtures, shell
// tests), driven over stdin and stdout. A thin shell over StoreCluster
// (store_cluster.h).
//
//   baton_test_servers --kind <kind> --dir <dir> [--slots N] [--no-proxy]
//   baton_test_servers --external-url <url> --dir <dir> [--slots N]
//
// kind: batond, postgres, redis, rediss, redlock, zookeeper, mysql, etcd,
// etcds, sqlite. <dir> is made if missing and kept (the caller removes it); the
// servers keep their data and logs there (postgres and redis in temporary
// directories of their own, removed at the stop). --slots N (1..64,
// default 1): N sets of TCP fault proxies, one per slot, each in front of
// every server; --no-proxy: none (every slot URL is the direct one).
//
// Protocol. Once the servers serve, stdout gets one fact per line, then
// `ready`, flushed:
//   url=<URL of slot 0>
//   direct_url=<URL straight to the servers>
//   slot_url.<i>=<URL of slot i>        one line per slot, i = 0..N-1
//   pg_conninfo=<libpq conninfo>        postgres only
//   servers=<number of servers that can be killed>
//   ready
// If they cannot be started: `error <why>` on stdout (and stderr), exit 1,
// nothing left running.
// Then one command per line on stdin, each answered on stdout by `ok` or
// `error <why>` (one line, flushed), in order:
//   freeze | thaw              SIGSTOP / SIGCONT every server process
//   kill <i> | restart <i>     kill -9 server i / start it again (same
//                              port and data); 0 <= i < servers
//   isolate <s> | rejoin <s>   blackhole / restore every proxy of slot s
//   blackhole <i> | unblackhole <i>
//                              blackhole / restore server i's proxies in
//                              every slot
//   cut <i>                    reset every connection through server i's
//                              proxies
//   delay <i> <ms>             one-way delay on server i's proxies (0: none)
//   quit                       answered `ok`, then as EOF
// On `quit`, EOF on stdin, SIGTERM or SIGINT: every server started is
// stopped by pid (a frozen one thawed first), then exit 0. Wait for the
// exit: the servers are gone once the process is.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/stores/store_cluster.h"

namespace {

using baton::testing::StoreCluster;
using baton::testing::StoreOptions;

// Written by the SIGTERM / SIGINT handler, polled with stdin. Both ends
// close-on-exec, so no server inherits them.
int g_stop_pipe[2] = {-1, -1};

void on_stop_signal(int) {
  const int saved = errno;
  const char c = 's';
  (void)!::write(g_stop_pipe[1], &c, 1);
  errno = saved;
}
// A handler, not SIG_IGN: an ignored signal stays ignored across exec, and
// the servers started here must keep their own SIGPIPE.
void on_sigpipe(int) {}

// One line on stdout, flushed. false if the reader is gone.
bool say(const std::string& line) {
  const std::string l = line + "\n";
  std::size_t done = 0;
  while (done < l.size()) {
    const ssize_t n = ::write(1, l.data() + done, l.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

int usage(const std::string& why) {
  std::fprintf(stderr,
               "baton_test_servers: %s\n"
               "usage: baton_test_servers --kind KIND --dir DIR [--slots N] "
               "[--no-proxy]\n"
               "       baton_test_servers --external-url URL --dir DIR "
               "[--slots N] [--no-proxy]\n"
               "KIND: batond postgres redis rediss redlock zookeeper mysql "
               "etcd etcds sqlite\n",
               why.c_str());
  return 2;
}

// A whole decimal number in [lo, hi], else false.
bool parse_int(std::string_view s, int lo, int hi, int* out) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) {
    return false;
  }
  *out = v;
  return true;
}

// The answer to one command line: "ok" or "error <why>". *quit on `quit`.
std::string answer(StoreCluster& c, const StoreOptions& o,
                   const std::string& line, bool* quit) {
  std::istringstream in(line);
  std::string verb, a1, a2, extra;
  in >> verb >> a1 >> a2 >> extra;
  if (verb.empty()) return "error empty command";
  if (!extra.empty()) return "error too many arguments: " + line;
  const bool external = !o.external_url.empty();
  std::string why;
  if (verb == "quit" || verb == "freeze" || verb == "thaw") {
    if (!a1.empty()) return "error " + verb + " takes no argument";
    if (verb == "quit") {
      *quit = true;
      return "ok";
    }
    return c.freeze(verb == "freeze", &why) ? "ok" : "error " + why;
  }
  const bool server_verb = verb == "kill" || verb == "restart" ||
                           verb == "blackhole" || verb == "unblackhole" ||
                           verb == "cut" || verb == "delay";
  const bool slot_verb = verb == "isolate" || verb == "rejoin";
  if (!server_verb && !slot_verb) return "error unknown command: " + verb;
  if (!a2.empty() && verb != "delay") {
    return "error " + verb + " takes one argument";
  }
  int i = 0;
  if (slot_verb) {
    if (!parse_int(a1, 0, o.slots - 1, &i)) {
      return "error " + verb + ": slot '" + a1 + "' is not 0.." +
             std::to_string(o.slots - 1);
    }
  } else if (c.servers() == 0 || !parse_int(a1, 0, c.servers() - 1, &i)) {
    return "error " + verb + ": server '" + a1 + "' is not one of the " +
           std::to_string(c.servers()) + " server(s)";
  }
  if (verb == "kill") {
    if (external) return "error an external store is not killed here";
    c.kill9(i);
    return "ok";
  }
  if (verb == "restart") return c.restart(i, &why) ? "ok" : "error " + why;
  // The rest act on the proxies.
  if (!c.has_proxy()) return "error " + verb + ": no proxies (--no-proxy)";
  if (slot_verb) {
    c.isolate_slot(i, verb == "isolate");
  } else if (verb == "blackhole" || verb == "unblackhole") {
    c.proxy_blackhole(i, verb == "blackhole");
  } else if (verb == "cut") {
    c.proxy_cut(i);
  } else {  // delay
    int ms = 0;
    if (!parse_int(a2, 0, 60'000, &ms)) {
      return "error delay: milliseconds '" + a2 + "' is not 0..60000";
    }
    c.proxy_delay(i, std::chrono::milliseconds(ms));
  }
  return "ok";
}

// Reads and answers commands until quit, EOF, a stop signal or a reader
// gone. Lines longer than 4 KiB are refused whole.
void serve(StoreCluster& c, const StoreOptions& o) {
  std::string buf;
  char chunk[4096];
  for (;;) {
    pollfd fds[2] = {{0, POLLIN, 0}, {g_stop_pipe[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    const ssize_t n = ::read(0, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // EOF (or stdin unreadable)
    buf.append(chunk, static_cast<std::size_t>(n));
    for (std::size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      bool quit = false;
      if (!say(answer(c, o, line, &quit)) || quit) return;
    }
    if (buf.size() > 4096) {
      buf.clear();
      if (!say("error command line longer than 4096 bytes")) return;
    }
  }
}

bool stop_requested() {
  pollfd p{g_stop_pipe[0], POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

}  // namespace

int main(int argc, char** argv) {
  StoreOptions o;
  o.slots = 1;
  std::string dir;
  bool have_kind = false;
  for (int k = 1; k < argc; ++k) {
    const std::string a = argv[k];
    const bool has_value = k + 1 < argc;
    if (a == "--kind" && has_value) {
      o.kind = argv[++k];
      have_kind = true;
    } else if (a == "--external-url" && has_value) {
      o.external_url = argv[++k];
    } else if (a == "--dir" && has_value) {
      dir = argv[++k];
    } else if (a == "--slots" && has_value) {
      if (!parse_int(argv[++k], 1, 64, &o.slots)) {
        return usage(std::string("--slots must be 1..64, not '") + argv[k] +
                     "'");
      }
    } else if (a == "--no-proxy") {
      o.proxies = false;
    } else if (a == "--help" || a == "-h") {
      usage("private store servers for tests");
      return 0;
    } else {
      return usage("unknown or incomplete argument '" + a + "'");
    }
  }
  if (have_kind == !o.external_url.empty()) {
    return usage("give one of --kind and --external-url");
  }
  if (dir.empty()) return usage("--dir is required");
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return usage("--dir " + dir + ": " + std::strerror(errno));
  }
  char abs[PATH_MAX];
  if (::realpath(dir.c_str(), abs) == nullptr) {
    return usage("--dir " + dir + ": " + std::strerror(errno));
  }

  // Handlers before any server starts: a SIGTERM during the start is
  // answered once the servers are up (then stopped), never by dying with
  // them left running.
  if (::pipe2(g_stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::fprintf(stderr, "baton_test_servers: pipe: %s\n",
                 std::strerror(errno));
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  sa.sa_handler = on_sigpipe;
  ::sigaction(SIGPIPE, &sa, nullptr);

  std::string error;
  std::unique_ptr<StoreCluster> c = StoreCluster::start(o, abs, &error);
  if (!c) {
    std::fprintf(stderr, "baton_test_servers: %s\n", error.c_str());
    say("error " + error);
    return 1;
  }
  if (!stop_requested()) {
    bool ok = say("url=" + c->url(0)) && say("direct_url=" + c->direct_url());
    for (int s = 0; ok && s < o.slots; ++s) {
      ok = say("slot_url." + std::to_string(s) + "=" + c->url(s));
    }
    if (ok && !c->pg_conninfo().empty()) {
      ok = say("pg_conninfo=" + c->pg_conninfo());
    }
    ok = ok && say("servers=" + std::to_string(c->servers())) && say("ready");
    if (ok) serve(*c, o);
  }
  c.reset();  // stops every server, by pid
  return 0;
}
