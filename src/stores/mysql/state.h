// stores/mysql/state.h — mysql://'s reading of some lock names' rows in one
// transaction (under their serialization rows); the scheduling step itself
// is the SQL stores' shared one (stores/sqlstep/sql_state.h).
//
// Thread safety: plain functions.
#ifndef BATON_STORES_MYSQL_STATE_H_
#define BATON_STORES_MYSQL_STATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "stores/mysql/my_conn.h"
#include "stores/sqlstep/sql_state.h"

namespace baton::store::my {

using sqlstep::Holder;
using sqlstep::multi_step;
using sqlstep::MultiMode;
using sqlstep::MultiOutcome;
using sqlstep::NameState;
using sqlstep::Request;
using sqlstep::sql_int;
using sqlstep::Tx;

// The SELECTs that load `names` (after the lock statement); `lock` adds
// FOR UPDATE. Four result sets: now, locks, holders, queue.
std::string load_sql(const std::string& prefix,
                     const std::vector<std::string>& names, bool lock);
// Parses the four result sets starting at `first`.
std::map<std::string, NameState> parse_state(
    const std::vector<ResultSet>& sets, std::size_t first,
    const std::vector<std::string>& names, std::int64_t* now_us);

}  // namespace baton::store::my

#endif  // BATON_STORES_MYSQL_STATE_H_
