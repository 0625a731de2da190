// stores/sqlite/options.cc — sqlite://'s descriptor: a file URL (the
// shared parser reads sqlite:///abs/path.db, sqlite://./rel.db and
// sqlite:/abs/path.db, and makes a relative path absolute), its options,
// and the open function that reads them.
#include "stores/sqlite/files.h"
#include "stores/sqlite/store_impl.h"

namespace baton::store {
namespace {

Result<std::unique_ptr<baton::Store>> open_sqlite(const StoreUrl& url) {
  const OptionValues& v = url.options;
  sq::StoreOptions o;
  o.path = url.path;
  o.prefix = v.text("prefix");
  if (!sqlstep::valid_identifier(o.prefix, 32)) {
    // Never echo the URL: a mistyped authority may carry a password.
    return Error(Errc::invalid_argument,
                 "sqlite store URL: prefix \"" + o.prefix +
                     "\" must match [a-z0-9_]+ (at most 32 bytes)");
  }
  if (v.count("max_idle_connections") > sqlstep::kMaxCount) {
    return Error(Errc::invalid_argument,
                 "sqlite store URL: max_idle_connections must be at most " +
                     std::to_string(sqlstep::kMaxCount));
  }
  o.max_idle = static_cast<int>(v.count("max_idle_connections"));
  o.request_timeout = v.duration("request_timeout");
  o.waiter_timeout = v.duration("waiter_timeout");
  o.recheck = v.duration("recheck_interval");
  o.allow_insecure_files = v.flag("allow_insecure_files");
  auto mode = sq::parse_file_mode(v.text("file_mode"), o.allow_insecure_files);
  if (!mode.ok()) return std::move(mode).error();
  o.file_mode = *mode;
  auto store = std::make_unique<sq_impl::SqliteStore>(std::move(o));
  if (Status st = store->open(); !st.ok()) return st.error();
  return std::unique_ptr<baton::Store>(std::move(store));
}

}  // namespace

const StoreDescriptor& sqlite_descriptor() {
  static const StoreDescriptor d = [] {
    StoreDescriptor m;
    m.name = "sqlite";
    m.schemes = {"sqlite"};
    m.summary = "one SQLite file shared by the processes of one host";
    m.url_form = "sqlite:///abs/path.db or sqlite://./rel.db";
    m.hosts_required = false;
    m.file_url = true;
    m.options = sqlstep::step_options(
        "100ms",
        "longest a waiter sleeps when neither the bell nor an expiry wakes "
        "it");
    // Every holder's owner token is in the file: private by default.
    m.options.push_back(text_option(
        "file_mode", "0600",
        "permission bits of the database and every file beside it (0660: "
        "a group shares the locks)"));
    m.options.push_back(flag_option(
        "allow_insecure_files", "0",
        "use a database, file beside it or directory other users may write "
        "or own (and allow a file_mode with bits for others)"));
    m.open = open_sqlite;
    return m;
  }();
  return d;
}

}  // namespace baton::store
