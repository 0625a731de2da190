// cli/config.h — the `baton` CLI's YAML config file (--config FILE or
// BATON_CONFIG): the store, the client's TTL and RetryInterval, and the
// connection-pool settings of the postgres:// store (MaxOpenConnections,
// MaxIdleConnections, ConnectionMaxLifetime, ConnectionMaxIdleTime), named
// as everywhere else (docs/cli.md, docs/stores/postgres.md):
//
//   Store: postgres://baton@db:5432/app?schema=baton
//   TTL: 15s                       # default --ttl
//   RetryInterval: 2s              # client retry pause; elect --retry-interval
//   Timeout: 5s                    # --timeout: bound of one store call
//   MetricsFile: /var/lib/node_exporter/textfile/etl.prom  # run, elect
//   Events: /var/log/etl-locks.jsonl                       # run, elect
//   MaxOpenConnections: 4          # postgres:// pool
//   MaxIdleConnections: 2
//   ConnectionMaxLifetime: 30m
//   ConnectionMaxIdleTime: 5m
//
// Flags win over BATON_STORE, which wins over the file. Bad input (unknown
// key, bad number or duration, a pool setting for a store that has no pool,
// a setting given both in the file and in the URL) is an invalid_argument
// naming the file and the key.
//
// Thread safety: pure functions (load_cli_config reads the file).
#ifndef BATON_CLI_CONFIG_H_
#define BATON_CLI_CONFIG_H_

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "baton/error.h"

namespace baton::cli {

struct CliConfig {
  std::string path;                              // the file it came from
  std::optional<std::string> store;              // Store
  std::optional<std::string> label;              // Label
  std::optional<std::chrono::milliseconds> ttl;  // TTL
  std::optional<std::chrono::milliseconds> retry_interval;  // RetryInterval
  std::optional<std::chrono::milliseconds> timeout;         // Timeout
  std::optional<std::string> metrics_file;  // MetricsFile (run, elect)
  std::optional<std::string> events;        // Events (run, elect)
  // Pool settings as URL query parameters, in file order (canonical names:
  // MaxOpenConnections, MaxIdleConnections, ConnectionMaxLifetime,
  // ConnectionMaxIdleTime), values already checked.
  std::vector<std::pair<std::string, std::string>> pool;
};

// Reads and checks a config file.
Result<CliConfig> load_cli_config(const std::string& path);

// `url` with the config's pool settings added as query parameters. Refused
// if the store has no connection pool (not postgres://) or the URL already
// sets one of them.
Result<std::string> store_url_with_pool(const CliConfig& config,
                                        const std::string& url);

}  // namespace baton::cli

#endif  // BATON_CLI_CONFIG_H_
