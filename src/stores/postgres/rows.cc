// stores/postgres/rows.cc — result rows → Grant / LockInfo / Error.
#include "stores/postgres/rows.h"

#include <cstdlib>

namespace baton::store::pg {
namespace {

enum Col {
  kKind,
  kName,
  kToken,
  kFencing,
  kTtl,
  kHolds,
  kCapacity,
  kExpires,
  kNow,
  kLabel,
  kN,
  kFlag,
  kCode,
  kMsg,
  kColumns
};

OwnerToken parse_token(const std::string& uuid) {
  std::string hex;
  hex.reserve(32);
  for (char c : uuid) {
    if (c != '-') hex += c;
  }
  auto t = OwnerToken::parse(hex);
  return t.ok() ? *t : OwnerToken{};
}

}  // namespace

std::vector<Row> parse_rows(const PGresult* res) {
  std::vector<Row> out;
  if (res == nullptr || PQnfields(res) < kColumns) return out;
  const int n = PQntuples(res);
  out.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto text = [&](int c) -> std::string {
      return PQgetisnull(res, i, c) ? std::string() : PQgetvalue(res, i, c);
    };
    auto num = [&](int c) -> std::int64_t {
      return PQgetisnull(res, i, c)
                 ? 0
                 : std::strtoll(PQgetvalue(res, i, c), nullptr, 10);
    };
    Row r;
    r.kind = text(kKind);
    r.name = text(kName);
    r.token = text(kToken);
    r.fencing = num(kFencing);
    r.ttl_ms = num(kTtl);
    r.holds = num(kHolds);
    r.capacity = num(kCapacity);
    r.expires_us = num(kExpires);
    r.now_us = num(kNow);
    r.label = text(kLabel);
    r.n = num(kN);
    r.flag = text(kFlag) == "t";
    r.code = text(kCode);
    r.msg = text(kMsg);
    out.push_back(std::move(r));
  }
  return out;
}

Grant to_grant(const Row& row, std::int64_t arrival_us) {
  Grant g;
  g.name = row.name;
  g.token = parse_token(row.token);
  g.fencing_token = static_cast<std::uint64_t>(row.fencing);
  g.ttl = milliseconds{row.ttl_ms};
  g.holds = static_cast<std::uint32_t>(row.holds);
  g.capacity = static_cast<std::uint32_t>(row.capacity);
  g.valid_for = std::chrono::microseconds{row.expires_us - arrival_us};
  g.store_expires_at_ms = row.expires_us / 1000;
  g.shared = row.flag;
  return g;
}

std::vector<Grant> to_grants(const std::vector<Row>& rows,
                             std::int64_t arrival_us) {
  std::vector<Grant> out;
  for (const Row& r : rows) {
    if (r.kind == "grant") out.push_back(to_grant(r, arrival_us));
  }
  return out;
}

std::vector<LockInfo> to_infos(const std::vector<Row>& rows) {
  std::vector<LockInfo> out;
  for (const Row& r : rows) {
    if (r.kind == "lock") {
      LockInfo info;
      info.name = r.name;
      info.capacity = static_cast<std::uint32_t>(r.capacity);
      info.last_fencing_token = static_cast<std::uint64_t>(r.fencing);
      out.push_back(std::move(info));
    } else if (out.empty()) {
      continue;
    } else if (r.kind == "holder") {
      out.back().holders.push_back(
          {r.label, static_cast<std::uint64_t>(r.fencing), milliseconds{r.n},
           static_cast<std::uint32_t>(r.holds), r.flag});
    } else if (r.kind == "waiter") {
      out.back().waiters.push_back(
          {r.label, milliseconds{r.n}, r.flag, r.code == "shared"});
    }
  }
  return out;
}

Error to_error(const std::vector<Row>& rows) {
  Errc code = Errc::internal;
  if (!errc_from_name(rows[0].code, &code)) code = Errc::internal;
  Error e(code, rows[0].msg);
  std::vector<HolderInfo> holders;
  for (const Row& r : rows) {
    if (r.kind == "holder") {
      holders.push_back({r.label, static_cast<std::uint64_t>(r.fencing),
                         milliseconds{r.n}, static_cast<std::uint32_t>(r.holds),
                         r.flag});
    }
  }
  if (!holders.empty()) e.with_holders(std::move(holders));
  return e;
}

}  // namespace baton::store::pg
