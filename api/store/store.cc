#include "api/store/store.h"

namespace distcomm {

Store::~Store() = default;

void Store::set(const std::string& key, const std::string& value) { set(key, to_bytes(value)); }

std::string Store::get_string(const std::string& key) { return to_string(get(key)); }

Store::Bytes to_bytes(const std::string& s) { return Store::Bytes(s.begin(), s.end()); }

std::string to_string(const Store::Bytes& b) { return std::string(b.begin(), b.end()); }

}  // namespace distcomm
