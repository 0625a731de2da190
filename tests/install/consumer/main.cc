// tests/install/consumer/main.cc — takes and gives back a lease through an
// installed baton (memory: store), as a user's program would.
#include <baton/client.h>

#include <chrono>
#include <iostream>

int main() {
  using namespace std::chrono_literals;
  auto client = baton::Client::open("memory:");
  if (!client) {
    std::cerr << client.error().to_string() << "\n";
    return 1;
  }
  baton::AcquireOptions o;
  o.ttl = 5s;
  auto lease = client->acquire("installed", 1s, o);
  if (!lease) {
    std::cerr << lease.error().to_string() << "\n";
    return 1;
  }
  auto released = client->release(*lease);
  if (!released || !*released) {
    std::cerr << "release failed\n";
    return 1;
  }
  std::cout << "ok fencing=" << lease->fencing_token << "\n";
  return 0;
}
