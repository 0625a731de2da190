// stores/postgres/rows.h — decoding the store functions' result rows (the
// composite type <schema>.res, see schema_tables.cc) into store values.
//
// Thread safety: pure functions.
#ifndef BATON_STORES_POSTGRES_ROWS_H_
#define BATON_STORES_POSTGRES_ROWS_H_

#include <libpq-fe.h>

#include <cstdint>
#include <string>
#include <vector>

#include "baton/error.h"
#include "baton/lease.h"
#include "baton/store.h"

namespace baton::store::pg {

struct Row {
  std::string kind, name, token, label, code, msg;
  std::int64_t fencing = 0, ttl_ms = 0, holds = 0, capacity = 0, expires_us = 0,
               now_us = 0, n = 0;
  bool flag = false;
};

std::vector<Row> parse_rows(const PGresult* res);

// A 'grant' row; valid_for = expiry − arrival_us (database time at which
// the store first received this request).
Grant to_grant(const Row& row, std::int64_t arrival_us);
// Every 'grant' row, in order.
std::vector<Grant> to_grants(const std::vector<Row>& rows,
                             std::int64_t arrival_us);
// 'lock' rows, each followed by its 'holder' and 'waiter' rows.
std::vector<LockInfo> to_infos(const std::vector<Row>& rows);
// An 'error' row (first), with the 'holder' rows after it.
Error to_error(const std::vector<Row>& rows);

}  // namespace baton::store::pg

#endif  // BATON_STORES_POSTGRES_ROWS_H_
