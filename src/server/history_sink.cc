#include "server/history_sink.h"

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

}  // namespace baton::server
