// server/journal_records.cc — the record codec of batond's journal and
// snapshot, and the scan that reads them back: valid records are applied,
// damaged stretches are skipped by resynchronising on the next valid record
// and reported (docs/server.md, "Durability").
#include <array>
#include <cstdio>
#include <optional>
#include <variant>

#include "server/journal.h"

namespace baton::server {

namespace {

constexpr std::uint8_t kRecordLeasePut = 1, kRecordLeaseDel = 2,
                       kRecordCounter = 3, kRecordFence = 4;
constexpr std::uint8_t kFlagShared = 1;  // lease-put flags byte
constexpr std::uint32_t kMaxRecord = 64u << 20;
constexpr std::size_t kHeader = 8;

std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}

class Enc {
 public:
  void u8(std::uint8_t v) { s_ += static_cast<char>(v); }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) s_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) s_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  void str(std::string_view v) {
    u32(static_cast<std::uint32_t>(v.size()));
    s_.append(v);
  }
  void token(const OwnerToken& t) {
    u64(t.hi);
    u64(t.lo);
  }
  // Frames the payload: length, CRC32C, payload.
  std::string frame() const {
    Enc h;
    h.u32(static_cast<std::uint32_t>(s_.size()));
    h.u32(crc32c(s_.data(), s_.size()));
    return h.s_ + s_;
  }

 private:
  std::string s_;
};

class Dec {
 public:
  explicit Dec(std::string_view s) : s_(s) {}
  bool u8(std::uint8_t* v) {
    if (s_.size() < 1) return false;
    *v = static_cast<std::uint8_t>(s_[0]);
    s_.remove_prefix(1);
    return true;
  }
  bool u32(std::uint32_t* v) {
    if (s_.size() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i)
      *v |= std::uint32_t(static_cast<std::uint8_t>(s_[i])) << (8 * i);
    s_.remove_prefix(4);
    return true;
  }
  bool u64(std::uint64_t* v) {
    if (s_.size() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i)
      *v |= std::uint64_t(static_cast<std::uint8_t>(s_[i])) << (8 * i);
    s_.remove_prefix(8);
    return true;
  }
  bool str(std::string* v) {
    std::uint32_t n = 0;
    if (!u32(&n) || s_.size() < n) return false;
    v->assign(s_.substr(0, n));
    s_.remove_prefix(n);
    return true;
  }
  bool token(OwnerToken* t) { return u64(&t->hi) && u64(&t->lo); }
  bool done() const { return s_.empty(); }

 private:
  std::string_view s_;
};

struct LeaseDel {
  std::string name;
  OwnerToken token;
};
struct CounterPut {
  std::string name;
  std::int64_t value = 0;
};
struct Fence {
  std::uint64_t mark = 0;
};
using Record = std::variant<core::LeaseRecord, LeaseDel, CounterPut, Fence>;

// Decodes a whole payload; nullopt if it is malformed or has trailing bytes
// (nothing is applied from a record that is not valid as a whole).
std::optional<Record> decode(std::string_view payload) {
  Dec d(payload);
  std::uint8_t type = 0;
  if (!d.u8(&type)) return std::nullopt;
  std::optional<Record> out;
  switch (type) {
    case kRecordLeasePut: {
      core::LeaseRecord r;
      std::uint64_t fencing = 0, ttl = 0, expiry = 0;
      std::uint32_t holds = 0, cap = 0, aliases = 0;
      if (!d.str(&r.name) || !d.token(&r.token) || !d.u64(&fencing) ||
          !d.u64(&ttl) || !d.u64(&expiry) || !d.u32(&holds) || !d.u32(&cap) ||
          !d.str(&r.label) || !d.str(&r.reentrancy_key) || !d.u32(&aliases)) {
        return std::nullopt;
      }
      for (std::uint32_t n = 0; n < aliases; ++n) {
        OwnerToken t;
        if (!d.token(&t)) return std::nullopt;
        r.aliases.push_back(t);
      }
      r.fencing_token = fencing;
      r.ttl = core::Nanos(static_cast<std::int64_t>(ttl));
      r.expiry = wall_expiry(static_cast<std::int64_t>(expiry));
      r.holds = holds;
      r.capacity = cap;
      // Optional trailing flags (bit 0: a shared lease, rule 18); absent in
      // exclusive records, which keep the format of earlier versions.
      if (!d.done()) {
        std::uint8_t flags = 0;
        if (!d.u8(&flags) || (flags & ~kFlagShared) != 0) return std::nullopt;
        r.shared = (flags & kFlagShared) != 0;
      }
      out = std::move(r);
      break;
    }
    case kRecordLeaseDel: {
      LeaseDel r;
      if (!d.str(&r.name) || !d.token(&r.token)) return std::nullopt;
      out = std::move(r);
      break;
    }
    case kRecordCounter: {
      CounterPut r;
      std::uint64_t v = 0;
      if (!d.str(&r.name) || !d.u64(&v)) return std::nullopt;
      r.value = static_cast<std::int64_t>(v);
      out = std::move(r);
      break;
    }
    case kRecordFence: {
      Fence r;
      if (!d.u64(&r.mark)) return std::nullopt;
      out = r;
      break;
    }
    default:
      return std::nullopt;
  }
  if (!d.done()) return std::nullopt;
  return out;
}

void apply(Record&& rec, DurableState* st) {
  auto raise = [st](std::uint64_t v) {
    if (v > st->fencing_high_water) st->fencing_high_water = v;
  };
  if (auto* r = std::get_if<core::LeaseRecord>(&rec)) {
    raise(r->fencing_token);
    auto key = std::make_pair(r->name, r->token);
    st->leases[key] = std::move(*r);
  } else if (auto* del = std::get_if<LeaseDel>(&rec)) {
    st->leases.erase(std::make_pair(del->name, del->token));
  } else if (auto* c = std::get_if<CounterPut>(&rec)) {
    st->counters[c->name] = c->value;
  } else {
    raise(std::get<Fence>(rec).mark);
  }
}

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Reads the record at `at`: the record and its framed size, or why it is not
// valid. `why` null: the resynchronising scan, which needs only yes or no
// and rejects an impossible type byte before computing a CRC.
std::optional<Record> read_at(std::string_view bytes, std::size_t at,
                              std::size_t* size, std::string* why) {
  const std::size_t left = bytes.size() - at;
  auto no = [why](auto&& text) -> std::optional<Record> {
    if (why != nullptr) *why = text();
    return std::nullopt;
  };
  if (left < kHeader) {
    return no([&] {
      return "only " + std::to_string(left) +
             " bytes left, a record header needs 8";
    });
  }
  Dec h(bytes.substr(at, kHeader));
  std::uint32_t len = 0, crc = 0;
  h.u32(&len);
  h.u32(&crc);
  if (len == 0) return no([] { return std::string("record length is 0"); });
  if (len > kMaxRecord) {
    return no([&] {
      return "record length " + std::to_string(len) +
             " is over the 64 MiB limit";
    });
  }
  if (left - kHeader < len) {
    return no([&] {
      return "record of " + std::to_string(len) +
             " bytes runs past the end of the file (" +
             std::to_string(left - kHeader) + " bytes left)";
    });
  }
  std::string_view payload = bytes.substr(at + kHeader, len);
  const auto type = static_cast<std::uint8_t>(payload[0]);
  if (why == nullptr && (type < kRecordLeasePut || type > kRecordFence)) {
    return std::nullopt;
  }
  const std::uint32_t actual = crc32c(payload.data(), payload.size());
  if (actual != crc) {
    return no([&] {
      return "CRC32C mismatch (stored " + hex32(crc) + ", computed " +
             hex32(actual) + ")";
    });
  }
  auto rec = decode(payload);
  if (!rec) {
    return no([&] {
      return "malformed payload (record type " + std::to_string(type) + ")";
    });
  }
  *size = kHeader + len;
  return rec;
}

std::uint32_t length_field(std::string_view bytes, std::size_t at) {
  std::uint32_t len = 0;
  if (bytes.size() - at >= 4) Dec(bytes.substr(at, 4)).u32(&len);
  return len;
}

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t size) {
  static const std::array<std::uint32_t, 256> table = make_table();
  std::uint32_t c = 0xFFFFFFFFu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i)
    c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::string encode_lease_put(const core::LeaseRecord& r) {
  Enc e;
  e.u8(kRecordLeasePut);
  e.str(r.name);
  e.token(r.token);
  e.u64(r.fencing_token);
  e.u64(static_cast<std::uint64_t>(r.ttl.count()));
  e.u64(static_cast<std::uint64_t>(wall_expiry_ms(r.expiry)));
  e.u32(r.holds);
  e.u32(r.capacity);
  e.str(r.label);
  e.str(r.reentrancy_key);
  e.u32(static_cast<std::uint32_t>(r.aliases.size()));
  for (const auto& t : r.aliases) e.token(t);
  if (r.shared) e.u8(kFlagShared);
  return e.frame();
}
std::string encode_lease_del(std::string_view name, const OwnerToken& token) {
  Enc e;
  e.u8(kRecordLeaseDel);
  e.str(name);
  e.token(token);
  return e.frame();
}
std::string encode_counter(std::string_view name, std::int64_t value) {
  Enc e;
  e.u8(kRecordCounter);
  e.str(name);
  e.u64(static_cast<std::uint64_t>(value));
  return e.frame();
}
std::string encode_fence(std::uint64_t mark) {
  Enc e;
  e.u8(kRecordFence);
  e.u64(mark);
  return e.frame();
}

std::vector<Damage> scan_records(std::string_view bytes, DurableState* state) {
  std::vector<Damage> damage;
  std::size_t at = 0;
  while (at < bytes.size()) {
    std::size_t size = 0;
    std::string why;
    if (auto rec = read_at(bytes, at, &size, &why)) {
      apply(std::move(*rec), state);
      ++state->records;
      at += size;
      continue;
    }
    // Resynchronise: the next offset where a whole valid record starts.
    std::size_t next = at + 1;
    for (; next < bytes.size(); ++next) {
      if (read_at(bytes, next, &size, nullptr)) break;
    }
    Damage d;
    d.offset = at;
    d.bytes = next - at;
    d.what = std::move(why);
    d.at_end = next >= bytes.size();
    const std::uint64_t own = kHeader + std::uint64_t{length_field(bytes, at)};
    d.records = !d.at_end && own == d.bytes ? 1 : 0;
    damage.push_back(std::move(d));
    at = next;
  }
  return damage;
}

std::string describe_damage(const Damage& d) {
  std::string out = "byte offset " + std::to_string(d.offset) + ": " + d.what;
  if (d.at_end) {
    out += "; nothing valid follows (" + std::to_string(d.bytes) +
           " bytes to the end of the file)";
  } else {
    out += "; " + std::to_string(d.bytes) +
           " bytes are unreadable, valid records follow from byte offset " +
           std::to_string(d.offset + d.bytes) + " (" +
           (d.records == 1 ? std::string("1 record")
                           : std::string("at least 1 record")) +
           " lost)";
  }
  return out;
}

}  // namespace baton::server
