// read_present (store.h): one request where the store can, check() and get() per key where not.
#include "api/store/prefix_store.h"
#include "api/store/store.h"
#include "api/store/tcp_store.h"

namespace distcomm {

std::vector<std::optional<Store::Bytes>> read_present(Store& store, const std::vector<std::string>& keys) {
  if (auto* tcp = dynamic_cast<TCPStore*>(&store)) return tcp->get_present(keys);
  if (auto* prefix = dynamic_cast<PrefixStore*>(&store)) {
    return read_present(*prefix->base(), prefix->prefixed(keys));
  }
  std::vector<std::optional<Store::Bytes>> values(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (store.check({keys[i]})) values[i] = store.get(keys[i]);
  }
  return values;
}

}  // namespace distcomm
