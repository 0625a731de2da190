// tests/support/stores/netns.cc — see netns.h.
#include "tests/support/stores/netns.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

extern char** environ;

namespace baton::testing {
namespace {

constexpr const char* kIp = "/usr/sbin/ip";
constexpr const char* kNft = "/usr/sbin/nft";

// Runs argv[0] with its arguments and waits; its exit status (-1: could
// not run), its output (stdout and stderr) in *out.
int run(const std::vector<std::string>& args, std::string* out = nullptr) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_adddup2(&fa, p[1], 2);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc =
      ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(p[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(p[0]);
  if (out != nullptr) *out = text;
  if (rc != 0) return -1;
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool must(const std::vector<std::string>& args, std::string* why) {
  std::string out;
  if (run(args, &out) == 0) return true;
  std::string cmd;
  for (const auto& a : args) cmd += (cmd.empty() ? "" : " ") + a;
  *why = "member network: `" + cmd + "` failed: " + out;
  return false;
}

std::string base36(unsigned long v) {
  std::string s;
  do {
    s.insert(s.begin(), "0123456789abcdefghijklmnopqrstuvwxyz"[v % 36]);
    v /= 36;
  } while (v != 0);
  return s;
}

// Namespaces and bridges of test processes that no longer run.
void remove_stale() {
  std::string out;
  run({kIp, "netns", "list"}, &out);
  const std::regex name("^(bt([0-9a-z]+)_[0-9a-z]+)m[0-9]+");
  std::set<std::string> dead;
  std::size_t at = 0;
  while (at < out.size()) {
    const std::size_t end = out.find('\n', at);
    const std::string line = out.substr(at, end - at);
    at = end == std::string::npos ? out.size() : end + 1;
    std::smatch m;
    if (!std::regex_search(line, m, name)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(m[2], nullptr, 36));
    if (::kill(pid, 0) == 0 || errno == EPERM) continue;
    run({kIp, "netns", "del", m[0]});
    dead.insert(m[1].str() + "br");
  }
  for (const auto& b : dead) run({kIp, "link", "del", b});
}

}  // namespace

std::unique_ptr<MemberNetwork> MemberNetwork::create(int n, std::string* why) {
  if (n < 1 || n > 8) {
    *why = "member network: 1..8 members";
    return nullptr;
  }
  if (::geteuid() != 0) {
    *why = "member network: needs root (network namespaces, nftables)";
    return nullptr;
  }
  for (const char* tool : {kIp, kNft}) {
    if (::access(tool, X_OK) != 0) {
      *why = std::string("member network: no ") + tool +
             (std::strcmp(tool, kNft) == 0 ? " (Debian package nftables)"
                                           : " (Debian package iproute2)");
      return nullptr;
    }
  }
  remove_stale();
  std::unique_ptr<MemberNetwork> net(new MemberNetwork());
  // Names and subnet of this process and instance: a network being torn
  // down (veths go asynchronously) never meets the next one's.
  static std::atomic<unsigned> instances{0};
  const unsigned k = instances++;
  const long pid = static_cast<long>(::getpid());
  net->tag_ =
      "bt" + base36(static_cast<unsigned long>(pid)) + "_" + base36(k % 1296);
  const std::string subnet = "10." + std::to_string(200 + pid % 50) + "." +
                             std::to_string((pid / 50 + k) % 250) + ".";
  const std::string bridge = net->tag_ + "br";
  if (!must({kIp, "link", "add", bridge, "type", "bridge"}, why)) {
    return nullptr;
  }
  net->bridge_ = true;
  if (!must({kIp, "addr", "add", subnet + "254/24", "dev", bridge}, why) ||
      !must({kIp, "link", "set", bridge, "up"}, why)) {
    return nullptr;
  }
  net->cut_.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const std::string ns = net->tag_ + "m" + std::to_string(i);
    const std::string outer = net->tag_ + "v" + std::to_string(i) + "o";
    const std::string inner = net->tag_ + "v" + std::to_string(i) + "i";
    const std::string host = subnet + std::to_string(i + 1);
    if (!must({kIp, "netns", "add", ns}, why)) return nullptr;
    net->names_.push_back(ns);
    net->hosts_.push_back(host);
    if (!must(
            {kIp, "link", "add", outer, "type", "veth", "peer", "name", inner},
            why) ||
        !must({kIp, "link", "set", inner, "netns", ns}, why) ||
        !must({kIp, "link", "set", outer, "master", bridge, "up"}, why) ||
        !must({kIp, "-n", ns, "addr", "add", host + "/24", "dev", inner},
              why) ||
        !must({kIp, "-n", ns, "link", "set", inner, "up"}, why) ||
        !must({kIp, "-n", ns, "link", "set", "lo", "up"}, why) ||
        !must({kIp, "netns", "exec", ns, kNft,
               "add table inet baton; "
               "add chain inet baton in { type filter hook input priority 0; "
               "}; "
               "add chain inet baton out { type filter hook output priority "
               "0; }"},
              why)) {
      return nullptr;
    }
  }
  return net;
}

MemberNetwork::~MemberNetwork() {
  for (const auto& ns : names_) run({kIp, "netns", "del", ns});
  if (bridge_) run({kIp, "link", "del", tag_ + "br"});
}

std::vector<std::string> MemberNetwork::exec_prefix(int i) const {
  return {kIp, "netns", "exec", names_[static_cast<std::size_t>(i)]};
}

bool MemberNetwork::apply(int i, std::string* why) {
  std::string rules = "flush chain inet baton in; flush chain inet baton out";
  for (int j : cut_[static_cast<std::size_t>(i)]) {
    const std::string& h = hosts_[static_cast<std::size_t>(j)];
    rules += "; add rule inet baton in ip saddr " + h + " drop";
    rules += "; add rule inet baton out ip daddr " + h + " drop";
  }
  std::string ignored;
  return must(
      {kIp, "netns", "exec", names_[static_cast<std::size_t>(i)], kNft, rules},
      why != nullptr ? why : &ignored);
}

bool MemberNetwork::cut(int i, int j, bool on, std::string* why) {
  if (i == j || i < 0 || j < 0 || i >= size() || j >= size()) {
    if (why != nullptr) *why = "member network: no link between these";
    return false;
  }
  auto& a = cut_[static_cast<std::size_t>(i)];
  auto& b = cut_[static_cast<std::size_t>(j)];
  if (on) {
    a.insert(j);
    b.insert(i);
  } else {
    a.erase(j);
    b.erase(i);
  }
  return apply(i, why) && apply(j, why);
}

void MemberNetwork::heal_all() {
  for (int i = 0; i < size(); ++i) {
    if (cut_[static_cast<std::size_t>(i)].empty()) continue;
    cut_[static_cast<std::size_t>(i)].clear();
    apply(i, nullptr);
  }
}

std::string MemberNetwork::cuts() const {
  std::string s;
  for (int i = 0; i < size(); ++i) {
    for (int j : cut_[static_cast<std::size_t>(i)]) {
      if (j > i) {
        s += (s.empty() ? "" : ",") + std::to_string(i) + "-" +
             std::to_string(j);
      }
    }
  }
  return s;
}

}  // namespace baton::testing
