#include "backends/nccl/unique_id_exchange.h"

#include "api/errors.h"
#include "backends/nccl/polling.h"

namespace distcomm {
namespace nccl {

std::string fresh_key_prefix(Store& store, int rank) {
  const int64_t made = store.add("nccl/backends_made_by_rank" + std::to_string(rank), 1);
  return "nccl/" + std::to_string(made) + "/";
}

Store::Bytes exchange_unique_id(const UniqueIdExchange& x, const std::function<Store::Bytes()>& make,
                                std::chrono::steady_clock::time_point deadline, const std::atomic<bool>& aborted) {
  if (x.root) {
    Store::Bytes id = make();
    x.store->set(x.key, id);
    return id;
  }
  const auto start = std::chrono::steady_clock::now();
  // The store is asked at most every 10 ms: a TCPStore check is a round trip.
  const Waited w = poll_until([&] { return x.store->check({x.key}); }, deadline, &aborted,
                              std::chrono::microseconds(10000));
  if (w == Waited::kAborted) {
    throw PeerFailure(x.label + ": aborted while rank " + std::to_string(x.rank) + " of " + std::to_string(x.size) +
                      " waited for rank 0's ncclUniqueId");
  }
  if (w == Waited::kTimedOut) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    throw Timeout(x.label + ": rank " + std::to_string(x.rank) + " of " + std::to_string(x.size) + " waited " +
                  std::to_string(waited.count()) + " ms for rank 0 to publish the ncclUniqueId (store key '" + x.key +
                  "'); rank 0 may have died or not yet issued its first op on this communicator");
  }
  Store::Bytes id = x.store->get(x.key);
  if (id.size() != x.id_size) {
    throw Error(x.label + ": the ncclUniqueId under store key '" + x.key + "' has " + std::to_string(id.size()) +
                " bytes, expected " + std::to_string(x.id_size) + " (is another job using the same store?)");
  }
  return id;
}

}  // namespace nccl
}  // namespace distcomm
