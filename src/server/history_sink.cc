#include "server/history_sink.h"

#include <algorithm>
#include <chrono>

namespace baton::server {

void HistorySink::seed(const core::LeaseRecord& lease) {
  live_[{lease.name, lease.token}] = {lease.fencing_token, lease.label,
                                      lease.shared, lease.expiry};
}

void HistorySink::lease_put(const core::LeaseRecord& lease) {
  if (next_ != nullptr) next_->lease_put(lease);
  auto [it, fresh] = live_.try_emplace({lease.name, lease.token});
  // Extends and reentrant joins move the expiry of a live lease.
  it->second.expiry = lease.expiry;
  if (!fresh) return;
  it->second.fencing_token = lease.fencing_token;
  it->second.label = lease.label;
  it->second.shared = lease.shared;
  history_.add({statuspage::HistoryEvent::Kind::grant, lease.name, lease.label,
                lease.fencing_token, lease.shared, statuspage::wall_ms(), 0});
}

void HistorySink::lease_removed(std::string_view name,
                                const OwnerToken& token) {
  if (next_ != nullptr) next_->lease_removed(name, token);
  auto it = live_.find(std::make_pair(std::string(name), token));
  if (it == live_.end()) return;
  using Kind = statuspage::HistoryEvent::Kind;
  const Kind kind = losing_                             ? Kind::lost
                    : clock_.now() >= it->second.expiry ? Kind::expire
                                                        : Kind::release;
  history_.add({kind, std::string(name), it->second.label,
                it->second.fencing_token, it->second.shared,
                statuspage::wall_ms(), 0});
  live_.erase(it);
}

void HistorySink::waiter_left(std::string_view name, std::string_view label,
                              bool shared, core::Instant arrival) {
  if (next_ != nullptr) next_->waiter_left(name, label, shared, arrival);
  const std::int64_t end = statuspage::wall_ms();
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      clock_.now() - arrival);
  history_.add({statuspage::HistoryEvent::Kind::wait, std::string(name),
                std::string(label), 0, shared,
                end - std::max<std::int64_t>(0, waited.count()), end});
}

}  // namespace baton::server
