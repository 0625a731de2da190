// batond — the baton lock server. See docs/server.md.
#include <spdlog/spdlog.h>

#include <csignal>
#include <iostream>
#include <string>

#include "baton/version.h"
#include "server/config.h"
#include "server/server.h"

// The commit this program was built from (cmake/BatonBuildCommit.cmake).
extern const char baton_build_commit[];

int main(int argc, char** argv) {
  baton::server::ServerConfig config;
  int exit_code = 0;
  const std::string version_text =
      "batond " + std::string(baton::version()) + "\ncommit " +
      baton_build_commit +
      "\nserves: baton:// (RESP2), batons:// (RESP2 over TLS, --tls-listen)";
  if (!baton::server::parse_command_line(argc, argv, &config, &exit_code,
                                         version_text)) {
    return exit_code;
  }
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %l batond: %v");
  if (auto s = baton::server::check_config(config); !s) {
    spdlog::error("{}", s.error().to_string());
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  baton::server::Server server(config);
  if (auto s = server.start(); !s) {
    spdlog::error("{}", s.error().to_string());
    return 1;
  }
  // Tests read the bound port from this line (--listen host:0).
  std::cout << "batond ready port=" << server.port()
            << " metrics_port=" << server.metrics_port()
            << " tls_port=" << server.tls_port() << std::endl;
  server.run();
  spdlog::info("batond stopped");
  return 0;
}
