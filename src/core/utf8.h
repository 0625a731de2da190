// core/utf8.h — the one UTF-8 check of the library, the CLI and the status
// page: where text leaves baton for a format that must be UTF-8 (JSON, the
// Prometheus exposition, the page's query parameters).
//
// Header-only, so that the CLI and the status page library, which link the
// client library but not core's objects directly, share it.
//
// Thread safety: pure functions.
#ifndef BATON_CORE_UTF8_H_
#define BATON_CORE_UTF8_H_

#include <cstddef>
#include <string_view>

namespace baton::core {

// Length (1..4) of the well-formed UTF-8 sequence starting at s[i], or 0 if
// none starts there: a stray continuation byte, a truncated sequence, an
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

}  // namespace baton::core

#endif  // BATON_CORE_UTF8_H_
