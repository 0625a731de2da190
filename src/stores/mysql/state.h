// stores/mysql/state.h — mysql://'s reading of some lock names' rows in one
// transaction (under their serialization rows); the scheduling step itself
// is the SQL stores' shared one (stores/sqlstep/sql_state.h).
//
// Thread safety: plain functions.
#ifndef BATON_STORES_MYSQL_STATE_H_
#define BATON_STORES_MYSQL_STATE_H_

#include <cstdint>
#include <map>
#include <optional>
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

// What a name's locks row holds besides the step's columns (schema
// version 3): `others`, the count of its holders and queue rows, and the
// inline holder (the lease a fast path granted, kept in the row itself
// while it is the lock's only holder and nobody waits).
struct RowExtra {
  bool row = false;  // a locks row was read
  int others = 0;
  std::optional<Holder> inline_holder;
};

// Parses the four result sets starting at `first`. An inline holder is
// one of the name's holders (live or not, as a holders row would be);
// `extra`, when given, gets each name's RowExtra.
std::map<std::string, NameState> parse_state(
    const std::vector<ResultSet>& sets, std::size_t first,
    const std::vector<std::string>& names, std::int64_t* now_us,
    std::map<std::string, RowExtra>* extra = nullptr);

// The scheduling transaction's first writes: each live inline holder moves
// to a holders row (slot 0; the step then sees every holder as a row, as
// before version 3) and an expired one is dropped from the row and from
// the state. Needs the names' locks rows locked (FOR UPDATE).
void spill(Tx& tx, const std::string& prefix,
           const std::map<std::string, RowExtra>& extra);

// Its last writes: `others` of each name whose count of holders and queue
// rows the transaction changed (or whose locks row it made).
void count_others(Tx& tx, const std::string& prefix,
                  const std::map<std::string, RowExtra>& extra);

}  // namespace baton::store::my

#endif  // BATON_STORES_MYSQL_STATE_H_
