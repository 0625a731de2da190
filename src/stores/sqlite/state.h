// stores/sqlite/state.h — sqlite://'s reading of some lock names' rows in
// its write transaction; the scheduling step itself is the SQL stores'
// shared one (stores/sqlstep/sql_state.h).
//
// Thread safety: plain functions.
#ifndef BATON_STORES_SQLITE_STATE_H_
#define BATON_STORES_SQLITE_STATE_H_

#include <map>
#include <string>
#include <vector>

#include "baton/error.h"
#include "stores/sqlite/db.h"
#include "stores/sqlstep/sql_state.h"

namespace baton::store::sq {

using sqlstep::Holder;
using sqlstep::multi_step;
using sqlstep::MultiMode;
using sqlstep::MultiOutcome;
using sqlstep::NameState;
using sqlstep::Request;
using sqlstep::sql_int;
using sqlstep::Tx;

// Reads the rows of `names` (locks, holders, queue) in the transaction
// open on `conn`.
Result<std::map<std::string, NameState>> load_state(
    Conn& conn, const std::string& prefix,
    const std::vector<std::string>& names);

}  // namespace baton::store::sq

#endif  // BATON_STORES_SQLITE_STATE_H_
