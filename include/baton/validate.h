// baton/validate.h — the input rules every entry point applies
// (docs/contract.md#rule-16), for callers that check input before they
// open a client: the baton CLI and config loaders. baton::Client applies
// the same checks itself; a refusal is invalid_argument naming the problem
// and the value, e.g. "TTL 0ms is out of range (1ms .. 7d)".
//
// Also the one UTF-8 check of the library, the CLI and the status page.
//
// Thread safety: pure functions.
#ifndef BATON_VALIDATE_H_
#define BATON_VALIDATE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "baton/error.h"

namespace baton {

// 1..512 bytes, no NUL. `what` names the thing ("lock name", "group name").
Status validate_lock_name(std::string_view name,
                          std::string_view what = "lock name");
// 1 ms .. 7 days.
Status validate_ttl(std::chrono::milliseconds ttl);
// 0 (try) .. 7 days, or milliseconds::max() (forever).
Status validate_wait(std::chrono::milliseconds wait);
// At least 1.
Status validate_capacity(std::uint64_t capacity);
// At most 256 bytes, no NUL (empty = the client's default label).
Status validate_label(std::string_view label);

// Length (1..4) of the well-formed UTF-8 sequence starting at s[i], or 0 if
// none starts there (for text written where UTF-8 is required: JSON,
// Prometheus labels): a stray continuation byte, a truncated sequence, an
// overlong form, a surrogate (U+D800..U+DFFF) or a code point past
// U+10FFFF. Requires i < s.size().
inline std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  std::size_t len = 0;
  unsigned min = 0;
  unsigned cp = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    len = 2, min = 0x80, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, min = 0x800, cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace baton

#endif  // BATON_VALIDATE_H_
