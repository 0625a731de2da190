// libFuzzer target for batond's request parser (clang only):
//   -fsanitize=fuzzer,address; see docs/server.md for the command.
#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/resp.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  // Small limits so the fuzzer reaches them.
  baton::proto::RequestParser parser({4096, 64});
  // Feed in two pieces to exercise partial frames.
  std::size_t half = size / 2;
  parser.feed(reinterpret_cast<const char*>(data), half);
  baton::proto::Request req;
  std::string msg;
  while (parser.next(&req, &msg) ==
         baton::proto::RequestParser::State::request) {
  }
  parser.feed(reinterpret_cast<const char*>(data) + half, size - half);
  while (parser.next(&req, &msg) ==
         baton::proto::RequestParser::State::request) {
  }
  return 0;
}
