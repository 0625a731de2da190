// tests/postgres/postgres_cli_test.cc — the `baton` CLI on postgres://: its
// YAML config (src/cli/config.h) configures the pool with its
// MaxOpenConnections... keys and bad values are refused naming the key; and
// clients whose clock is hours off (Debian's faketime) still see leases expire
// by the database's clock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <thread>
#include <vector>

#include "cli/config.h"
#include "pg_test_util.h"

namespace baton::testing {
namespace {

// A YAML file in a temp dir, removed at the end of the test.
class YamlFile {
 public:
  explicit YamlFile(const std::string& text) {
    char tmpl[] = "/tmp/baton-cfg-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    path_ = tmpl;
    if (fd >= 0) ::close(fd);
    std::ofstream(path_) << text;
  }
  ~YamlFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(PostgresConfig, YamlPoolSettingsConfigureThePool) {
  YamlFile f("Store: " + pg_server().url("application_name=cfgpool") +
             "\n"
             "TTL: 5s\n"
             "RetryInterval: 250ms\n"
             "MaxOpenConnections: 2\n"
             "MaxIdleConnections: 2\n"
             "ConnectionMaxLifetime: 10m\n"
             "ConnectionMaxIdleTime: 30s\n");
  auto cfg = cli::load_cli_config(f.path());
  ASSERT_TRUE(cfg.ok()) << cfg.error().to_string();
  EXPECT_EQ(cfg->ttl, 5s);
  EXPECT_EQ(cfg->retry_interval, 250ms);
  auto url = cli::store_url_with_pool(*cfg, *cfg->store);
  ASSERT_TRUE(url.ok()) << url.error().to_string();
  // The settings reach the store's options under their own names.
  store::pg::ConnParams params;
  std::string where;
  auto o = pg_settings(*url, &params, &where);
  ASSERT_TRUE(o.ok()) << o.error().to_string();
  EXPECT_EQ(o->pool.max_open, 2);
  EXPECT_EQ(o->pool.max_idle, 2);
  EXPECT_EQ(o->pool.max_lifetime, std::chrono::minutes(10));
  EXPECT_EQ(o->pool.max_idle_time, 30s);
  // And they bound the real pool: 6 threads share 2 connections.
  ClientOptions co;
  co.retry_interval = *cfg->retry_interval;
  auto client = Client::open(*url, co);
  ASSERT_TRUE(client.ok()) << client.error().to_string();
  Sql sql(pg_server().conninfo());
  const std::string name = unique_name("cfgpool");
  std::atomic<int> failures{0}, peak{0};
  std::atomic<bool> stop{false};
  std::thread watch([&] {
    while (!stop) {
      const int n =
          std::stoi(sql.one("SELECT count(*) FROM pg_stat_activity WHERE "
                            "application_name = 'cfgpool'"));
      peak = std::max(peak.load(), n);
      std::this_thread::sleep_for(5ms);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        auto l = client->acquire(name, 30s, ttl_opts(*cfg->ttl));
        if (!l.ok() || !*client->release(*l)) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  stop = true;
  watch.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(peak.load(), 2);  // the pool was used ...
  EXPECT_LE(peak.load(), 3);  // ... within 2 pooled + the LISTEN connection
}

TEST(PostgresConfig, BadValuesAreRefusedNamingTheKey) {
  const std::string store = "Store: " + pg_server().url() + "\n";
  struct Case {
    std::string yaml, key;
  };
  for (const Case& c : std::vector<Case>{
           {store + "MaxOpenConnections: 0\n", "MaxOpenConnections"},
           {store + "MaxOpenConnections: lots\n", "MaxOpenConnections"},
           {store + "MaxIdleConnections: -1\n", "MaxIdleConnections"},
           {store + "ConnectionMaxLifetime: soon\n", "ConnectionMaxLifetime"},
           {store + "ConnectionMaxIdleTime: [1, 2]\n", "ConnectionMaxIdleTime"},
           {store + "TTL: 0s\n", "TTL"},
           {store + "RetryInterval: fast\n", "RetryInterval"},
           {store + "MaxOpenConection: 3\n", "MaxOpenConection"},
       }) {
    YamlFile f(c.yaml);
    auto cfg = cli::load_cli_config(f.path());
    ASSERT_FALSE(cfg.ok()) << c.yaml;
    EXPECT_EQ(cfg.error().code(), Errc::invalid_argument) << c.yaml;
    EXPECT_NE(cfg.error().message().find(c.key), std::string::npos)
        << cfg.error().message();
    EXPECT_NE(cfg.error().message().find(f.path()), std::string::npos)
        << cfg.error().message();
  }
  // A pool setting for a store without a pool, or set twice, is refused.
  YamlFile pool("MaxOpenConnections: 4\n");
  auto cfg = cli::load_cli_config(pool.path());
  ASSERT_TRUE(cfg.ok()) << cfg.error().to_string();
  auto other = cli::store_url_with_pool(*cfg, "baton://127.0.0.1:7420");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message().find("MaxOpenConnections"),
            std::string::npos);
  auto twice =
      cli::store_url_with_pool(*cfg, pg_server().url("max_open_connections=2"));
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message().find("both"), std::string::npos);
}

#ifdef BATON_CLI_PATH
// The `baton` binary reads the file: TTL becomes the default --ttl, the
// pool settings reach the store, and a bad file exits 64 naming the key.
TEST(PostgresConfig, BatonCliUsesTheConfigFile) {
  YamlFile good("Store: " + pg_server().url() +
                "\nTTL: 7s\nMaxOpenConnections: 1\n"
                "ConnectionMaxIdleTime: 1m\n");
  const std::string name = unique_name("cfgcli");
  int st = 0;
  std::string out = sh(std::string(BATON_CLI_PATH) + " --config " +
                           good.path() + " acquire " + name + " --json",
                       &st);
  ASSERT_EQ(WEXITSTATUS(st), 0) << out;
  EXPECT_NE(out.find("\"ttl_ms\":7000"), std::string::npos) << out;
  // A flag still wins over the file.
  // (--config may also follow the subcommand, like every global flag.)
  out = sh(std::string(BATON_CLI_PATH) + " acquire " + name +
               "-2 --ttl 3s --json --config " + good.path(),
           &st);
  ASSERT_EQ(WEXITSTATUS(st), 0) << out;
  EXPECT_NE(out.find("\"ttl_ms\":3000"), std::string::npos) << out;
  YamlFile bad("Store: " + pg_server().url() + "\nMaxIdleConnections: x\n");
  out = sh(
      "BATON_CONFIG=" + bad.path() + " " + BATON_CLI_PATH + " status " + name,
      &st);
  EXPECT_EQ(WEXITSTATUS(st), 64) << out;
  EXPECT_NE(out.find("MaxIdleConnections"), std::string::npos) << out;
}

std::int64_t db_now_ms(Sql& sql) {
  return std::stoll(
      sql.one("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"));
}

std::int64_t json_int(const std::string& out, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("\"" + key + "\":(-?[0-9]+)"))) {
    return -1;
  }
  return std::stoll(m[1]);
}

// `faketime -f SHIFT` without the wrapper: the wrapper shares its clock
// with children through a POSIX semaphore named after its pid, and one left
// behind by a killed process makes it fail ("sem_open: File exists").
// Preloading libfaketime with FAKETIME set shifts one process, no IPC.
std::string faketime(const std::string& shift) {
  return "env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 "
         "FAKETIME='" +
         shift + "' ";
}

// Seconds by this process's clock and by one run under faketime(shift).
std::int64_t faked_offset_s(const std::string& shift) {
  int st = 0;
  const std::string faked = sh(faketime(shift) + "date +%s", &st);
  if (st != 0) return 0;
  try {
    return std::stoll(faked) - std::stoll(sh("date +%s"));
  } catch (...) {
    return 0;
  }
}

// Rule: the store never reads the client's clock for expiry. Clients run
// with their clock 5 hours ahead and 5 hours behind: the lease's expiry is
// the database's now + TTL, the client that thinks it long expired cannot
// take it early, and the one that thinks it is far from due gets it once
// the database says it expired.
TEST(PostgresCli, ExpiryFollowsTheDatabaseClockWhenClientClocksAreHoursOff) {
  const std::int64_t ahead = faked_offset_s("+5h");
  const std::int64_t behind = faked_offset_s("-5h");
  if (ahead < 4 * 3600 || behind > -4 * 3600) {
    GTEST_SKIP() << "faketime does not shift this process's clock (+5h gave "
                 << ahead << "s, -5h gave " << behind
                 << "s); install Debian's faketime package";
  }
  Sql sql(pg_server().conninfo());
  ASSERT_TRUE(sql.ok());
  // Only the wall clock is shifted (clock skew is a wall-clock matter; a
  // monotonic clock 5 h back would be negative on a machine up for less).
  // The client times its own waits with the monotonic clock and never
  // reads the wall clock for expiry.
  ::setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
  const std::string baton =
      std::string(BATON_CLI_PATH) + " --store '" + pg_server().url() + "' ";
  const std::string name = unique_name("faketime");
  int st = 0;
  const std::int64_t before = db_now_ms(sql);
  std::string out =
      sh(faketime("+5h") + baton + "acquire " + name + " --ttl 6s --json", &st);
  const std::int64_t after = db_now_ms(sql);
  ASSERT_EQ(WEXITSTATUS(st), 0) << out;
  const std::int64_t expires = json_int(out, "store_expires_at_ms");
  const std::int64_t first_fencing = json_int(out, "fencing_token");
  // The expiry is the database's now + 6 s, not the client's (5 h ahead).
  EXPECT_GE(expires, before + 6000) << out;
  EXPECT_LE(expires, after + 6000) << out;
  // A client 5 h ahead thinks the lease expired hours ago: still refused
  // while the database says it lives.
  out =
      sh(faketime("+5h") + baton + "acquire " + name + " --ttl 2s --json", &st);
  const std::int64_t refused_at = db_now_ms(sql);
  if (refused_at < expires) {
    EXPECT_EQ(WEXITSTATUS(st), 75) << out;
  }
  // A client 5 h behind waits, and is granted once the database's clock
  // passes the expiry (not 5 h later, not before).
  out = sh(faketime("-5h") + baton + "acquire " + name +
               " --ttl 2s --wait 30s --json",
           &st);
  ASSERT_EQ(WEXITSTATUS(st), 0) << out;
  const std::int64_t granted_expiry = json_int(out, "store_expires_at_ms");
  EXPECT_GE(granted_expiry - 2000, expires) << "granted before it expired";
  EXPECT_LE(granted_expiry - 2000, db_now_ms(sql));
  EXPECT_GT(json_int(out, "fencing_token"), first_fencing);
}
#endif

}  // namespace
}  // namespace baton::testing
