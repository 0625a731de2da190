// stores/zookeeper/zk_conn_async.cc — Conn's requests made without
// waiting: their completions run on the C client's completion thread.
#include <zookeeper/zookeeper.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stores/zookeeper/zk_conn.h"
#include "stores/zookeeper/zk_handle.h"

namespace baton::store::zk {
namespace {

// read_child_async(): the listing's completion sends the read on the same
// handle (alive while its completion thread runs a callback: closing it
// waits for that thread).
struct ChildRead {
  zhandle_t* zh = nullptr;
  std::string parent, path;
  Conn::Pick pick;
  Conn::Done done;
};
void on_child_data(int rc, const char* value, int len,
                   const struct ::Stat* stat, const void* data) {
  std::unique_ptr<ChildRead> c(
      static_cast<ChildRead*>(const_cast<void*>(data)));
  Stat st;
  std::string v;
  if (rc == ZOK) {
    copy_stat(stat, &st);
    if (value != nullptr && len > 0) v.assign(value, len);
  }
  c->done(rc, c->path, std::move(v), st);
}
void on_child_list(int rc, const struct String_vector* strings,
                   const struct ::Stat*, const void* data) {
  std::unique_ptr<ChildRead> c(
      static_cast<ChildRead*>(const_cast<void*>(data)));
  if (rc != ZOK) {
    c->done(rc, "", {}, Stat{});
    return;
  }
  std::vector<std::string> names;
  for (int i = 0; strings != nullptr && i < strings->count; ++i) {
    names.emplace_back(strings->data[i]);
  }
  const std::string child = c->pick(names);
  if (child.empty()) {
    c->done(ZNONODE, "", {}, Stat{});
    return;
  }
  c->path = c->parent + "/" + child;
  const int sent = zoo_aget(c->zh, c->path.c_str(), 0, on_child_data, c.get());
  if (sent == ZOK) {
    c.release();  // on_child_data owns it now
  } else {
    c->done(sent, c->path, {}, Stat{});
  }
}

}  // namespace

int Conn::read_child_async(const std::string& parent, Pick pick, Done done) {
  auto h = handle();
  if (h == nullptr) return ZINVALIDSTATE;
  auto c = std::make_unique<ChildRead>();
  c->zh = h->zh;
  c->parent = parent;
  c->pick = std::move(pick);
  c->done = std::move(done);
  const int rc =
      zoo_aget_children2(h->zh, parent.c_str(), 0, on_child_list, c.get());
  if (rc == ZOK) c.release();  // on_child_list owns it now
  return rc;
}

}  // namespace baton::store::zk
