// core/lock_table_store.cc — the compact containers of LockTable: the lock
// allocation (struct + name bytes), the open-addressing lock index, the
// 4-ary timer heap and the label interner. See lock_table_impl.h.
#include <cstring>
#include <new>

#include "core/lock_table_impl.h"

namespace baton::core {

// ----------------------------------------------------------------- LockE

LockE* LockE::create(std::string_view name, std::uint32_t hash,
                     std::uint32_t capacity) {
  void* mem = ::operator new(sizeof(LockE) + name.size());
  auto* lock = new (mem) LockE();
  std::memcpy(static_cast<char*>(mem) + sizeof(LockE), name.data(),
              name.size());
  lock->name_len = static_cast<std::uint32_t>(name.size());
  lock->hash = hash;
  lock->capacity = capacity;
  return lock;
}

void LockE::destroy(LockE* lock) {
  lock->~LockE();
  ::operator delete(static_cast<void*>(lock));
}

LeaseE* LockE::find_lease(const OwnerToken& token) {
  if (first.holds > 0 && first.token == token) return &first;
  if (!ext) return nullptr;
  if (auto it = ext->more.find(token); it != ext->more.end()) {
    return &it->second;
  }
  if (auto it = ext->aliases.find(token); it != ext->aliases.end()) {
    return it->second;
  }
  return nullptr;
}

std::uint32_t name_hash(std::string_view name) {
  // FNV-1a, 32 bits: cheap, and the index only needs a spread of bits.
  std::uint32_t h = 2166136261u;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

// ------------------------------------------------------------- LockIndex

LockIndex::~LockIndex() { clear(); }

void LockIndex::clear() {
  for (LockE*& l : slots_) {
    if (l != nullptr) LockE::destroy(l);
    l = nullptr;
  }
  size_ = 0;
}

LockE* LockIndex::find(std::string_view name, std::uint32_t hash) const {
  if (slots_.empty()) return nullptr;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    LockE* l = slots_[i];
    if (l == nullptr) return nullptr;
    if (l->hash == hash && l->name() == name) return l;
  }
}

void LockIndex::prefetch_slot(std::uint32_t hash) const {
  if (!slots_.empty()) __builtin_prefetch(&slots_[hash & (slots_.size() - 1)]);
}

void LockIndex::prefetch_lock(std::uint32_t hash) const {
  if (slots_.empty()) return;
  const LockE* l = slots_[hash & (slots_.size() - 1)];
  if (l != nullptr) {
    __builtin_prefetch(&l->hash);  // what find() reads first
    __builtin_prefetch(l);
  }
}

void LockIndex::insert(LockE* lock) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = lock->hash & mask;
  while (slots_[i] != nullptr) i = (i + 1) & mask;
  slots_[i] = lock;
  ++size_;
}

void LockIndex::erase(LockE* lock) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = lock->hash & mask;
  while (slots_[i] != lock) i = (i + 1) & mask;
  // Backward-shift deletion: pull later members of the probe run into the
  // hole when their home slot does not lie (cyclically) in (i, j].
  std::size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    LockE* l = slots_[j];
    if (l == nullptr) break;
    std::size_t home = l->hash & mask;
    bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
    if (movable) {
      slots_[i] = l;
      i = j;
    }
  }
  slots_[i] = nullptr;
  --size_;
}

void LockIndex::grow() {
  std::vector<LockE*> old;
  old.swap(slots_);
  slots_.assign(old.empty() ? 16 : old.size() * 2, nullptr);
  const std::size_t mask = slots_.size() - 1;
  for (LockE* l : old) {
    if (l == nullptr) continue;
    std::size_t i = l->hash & mask;
    while (slots_[i] != nullptr) i = (i + 1) & mask;
    slots_[i] = l;
  }
}

// ------------------------------------------------------------- TimerHeap

void TimerHeap::set(TimerNode* node, Instant when) {
  if (node->heap_pos == kNoTimer) {
    v_.push_back({when, node});
    node->heap_pos = static_cast<std::uint32_t>(v_.size() - 1);
    sift_up(v_.size() - 1);
    return;
  }
  std::size_t i = node->heap_pos;
  Instant old = v_[i].when;
  v_[i].when = when;
  if (when < old) {
    sift_up(i);
  } else {
    sift_down(i);
  }
}

void TimerHeap::erase(TimerNode* node) {
  if (node->heap_pos == kNoTimer) return;
  std::size_t i = node->heap_pos;
  node->heap_pos = kNoTimer;
  Entry last = v_.back();
  v_.pop_back();
  if (i == v_.size()) return;
  place(i, last);
  if (i > 0 && last.when < v_[(i - 1) / 4].when) {
    sift_up(i);
  } else {
    sift_down(i);
  }
}

void TimerHeap::sift_up(std::size_t i) {
  Entry e = v_[i];
  while (i > 0) {
    std::size_t parent = (i - 1) / 4;
    if (!(e.when < v_[parent].when)) break;
    place(i, v_[parent]);
    i = parent;
  }
  place(i, e);
}

void TimerHeap::sift_down(std::size_t i) {
  Entry e = v_[i];
  const std::size_t n = v_.size();
  for (;;) {
    std::size_t child = 4 * i + 1;
    if (child >= n) break;
    std::size_t best = child;
    for (std::size_t c = child + 1; c < child + 4 && c < n; ++c) {
      if (v_[c].when < v_[best].when) best = c;
    }
    if (!(v_[best].when < e.when)) break;
    place(i, v_[best]);
    i = best;
  }
  place(i, e);
}

// -------------------------------------------------------------- Interner

const std::string* Interner::acquire(std::string_view s) {
  if (s.empty()) return nullptr;
  auto it = refs_.find(s);
  if (it == refs_.end()) it = refs_.emplace(std::string(s), 0).first;
  ++it->second;
  return &it->first;
}

void Interner::release(const std::string* s) {
  if (s == nullptr) return;
  auto it = refs_.find(std::string_view(*s));
  if (it != refs_.end() && --it->second == 0) refs_.erase(it);
}

}  // namespace baton::core
