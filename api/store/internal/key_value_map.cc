#include "api/store/internal/key_value_map.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace distcomm {
namespace internal {

bool KeyValueMap::set(const std::string& key, Bytes value) {
  auto r = map_.insert_or_assign(key, std::move(value));
  return r.second;
}

const KeyValueMap::Bytes* KeyValueMap::find(const std::string& key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

int64_t KeyValueMap::add(const std::string& key, int64_t delta, bool* created) {
  const int64_t v = added_value(key, find(key), delta);
  const bool is_new = set(key, encode_integer(v));
  if (created) *created = is_new;
  return v;
}

KeyValueMap::Bytes KeyValueMap::compare_set(const std::string& key, const Bytes& expected,
                                            const Bytes& desired, bool* created) {
  const Bytes* current = find(key);
  const bool swap = compare_set_matches(current, expected);
  if (created) *created = swap && current == nullptr;
  if (swap) {
    set(key, desired);
    return desired;
  }
  return current ? *current : Bytes();
}

std::vector<std::string> KeyValueMap::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (!contains(k)) out.push_back(k);
  }
  return out;
}

int64_t added_value(const std::string& key, const Store::Bytes* current, int64_t delta) {
  int64_t base = 0;
  if (current) {
    // strtoll needs a terminated string and accepts leading blanks; insist on the exact
    // text add() writes, so that a value set by hand is either an integer or an error.
    const std::string text(current->begin(), current->end());
    char* end = nullptr;
    errno = 0;
    base = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) ||
        end != text.c_str() + text.size() || errno == ERANGE) {
      throw StoreError("Store::add: the value of key '" + key + "' is not a 64-bit integer");
    }
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(base, delta, &sum)) {
    throw StoreError("Store::add: adding " + std::to_string(delta) + " to key '" + key +
                     "' (" + std::to_string(base) + ") overflows int64");
  }
  return sum;
}

Store::Bytes encode_integer(int64_t v) { return to_bytes(std::to_string(v)); }

bool compare_set_matches(const Store::Bytes* current, const Store::Bytes& expected) {
  return current ? *current == expected : expected.empty();
}

std::string format_duration(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  std::ostringstream s;
  s << static_cast<double>(ms) / 1000.0 << " s";
  return s.str();
}

Timeout wait_timeout(const std::string& store, const std::vector<std::string>& missing,
                     std::chrono::milliseconds timeout) {
  std::string keys;
  for (const auto& k : missing) keys += (keys.empty() ? "'" : ", '") + k + "'";
  return Timeout(store + ": timed out after " + format_duration(timeout) +
                 " waiting for key" + (missing.size() == 1 ? " " : "s ") + keys +
                 "; check that the rank that sets " + (missing.size() == 1 ? "it" : "them") +
                 " is running, or raise the store timeout");
}

}  // namespace internal
}  // namespace distcomm
