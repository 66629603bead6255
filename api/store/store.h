// Store: the small key-value service ranks use to find each other (like c10d's Store).
//
// Implementations: TCPStore (tcp_store.h), FileStore (file_store.h), HashStore
// (hash_store.h, one process), PrefixStore (prefix_store.h, a namespace per group).
// Values are bytes. get() and wait() block until the keys exist or the timeout passes
// (then they throw Timeout naming the keys); connection and I/O failures throw StoreError.
#pragma once

#include "api/language_standard.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/timeouts.h"

namespace distcomm {

class Store {
 public:
  using Bytes = std::vector<uint8_t>;
  // A store's timeout unless set: 5 minutes, as c10d's TCPStore. kUseDefault (timeouts.h)
  // passed to a call means the store's timeout.
  static constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::minutes(5);

  virtual ~Store();

  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Blocks until key exists (or the timeout passes), then returns its value.
  virtual Bytes get(const std::string& key) = 0;
  // Adds delta to the integer stored at key (0 when absent), returns the new value.
  // Atomic across all clients. The value is kept as decimal text.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // If key's value equals expected (or key is absent and expected is empty), sets
  // desired. Returns the value now stored.
  virtual Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  // True when every key exists, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Blocks until every key exists; throws Timeout naming the missing ones.
  virtual void wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout = kUseDefault) = 0;
  // True if the key existed.
  virtual bool delete_key(const std::string& key) = 0;
  virtual int64_t num_keys() = 0;

  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Conveniences over the byte interface.
  void set(const std::string& key, const std::string& value);
  std::string get_string(const std::string& key);

 protected:
  std::chrono::milliseconds resolve(std::chrono::milliseconds t) const {
    return is_use_default(t) ? timeout_ : t;
  }
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
};

using StorePtr = std::shared_ptr<Store>;

// Each key's value, or nullopt where the key does not exist; never waits. On a TCPStore
// (also behind PrefixStores) it is one request, where check() and get() per key are 2N: what
// a rank reads when it looks at every rank's report. Any other store: check() and get() per
// key. A free function, not a virtual: a virtual appended to Store would move no slot, but
// the core would call it on stores built against a Store without it.
std::vector<std::optional<Store::Bytes>> read_present(Store& store, const std::vector<std::string>& keys);

Store::Bytes to_bytes(const std::string& s);
std::string to_string(const Store::Bytes& b);

}  // namespace distcomm
