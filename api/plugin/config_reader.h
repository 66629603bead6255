// ConfigReader: how every plugin reads its settings from BackendOptions::config, so that
// numbers, booleans and names are accepted the same way by every backend, and a bad value
// is refused in the same words, before anything is sent:
//   "<backend> backend config <key>='<value>': expected <what it accepts>"
//
//   const ConfigReader r(options.config, "shm");
//   c.slots = r.integer("shm_slots", 4, 2, 64);
//   c.eager = r.boolean("eager_init", false);
//   c.mode = r.choice("progress", Mode::kWaiters, {{"waiters", Mode::kWaiters}, {"thread", Mode::kThread}});
//
// An absent key gives the default. Keys the reader is not asked about are left alone: one
// map serves every backend of a "cpu:gloo,cuda:nccl" group. Header-only, so that plugins
// (which depend on //api:headers alone) and the core share one definition.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>

#include "api/errors.h"

namespace distcomm {

class ConfigReader {
 public:
  using Map = std::map<std::string, std::string>;

  // backend: the name the messages give ("gloo", "shm", ...). config must outlive the reader.
  ConfigReader(const Map& config, std::string backend) : config_(config), backend_(std::move(backend)) {}

  // The value as set, or nullptr when the key is absent.
  const std::string* find(const std::string& key) const {
    auto it = config_.find(key);
    return it == config_.end() ? nullptr : &it->second;
  }

  std::string text(const std::string& key, const std::string& fallback = "") const {
    const std::string* v = find(key);
    return v ? *v : fallback;
  }

  // A decimal integer in [min, max].
  long long integer(const std::string& key, long long fallback, long long min, long long max) const {
    return integer(key, fallback, min, max, "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  }

  // The same, where the range is better said in the setting's own terms ("a CUDA device
  // index (or -1: automatic)").
  long long integer(const std::string& key, long long fallback, long long min, long long max,
                    const std::string& expected) const {
    const std::string* v = find(key);
    if (!v) return fallback;
    errno = 0;
    char* end = nullptr;
    const long long n = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0' || errno == ERANGE || n < min || n > max) refuse(key, *v, expected);
    return n;
  }

  // 1/0, true/false, yes/no or on/off.
  bool boolean(const std::string& key, bool fallback) const {
    const std::string* v = find(key);
    if (!v) return fallback;
    if (*v == "1" || *v == "true" || *v == "yes" || *v == "on") return true;
    if (*v == "0" || *v == "false" || *v == "no" || *v == "off") return false;
    refuse(key, *v, "1/0, true/false, yes/no or on/off");
  }

  // One of a few names, each standing for a value; the message lists the names in order.
  template <typename T>
  T choice(const std::string& key, T fallback, std::initializer_list<std::pair<const char*, T>> names) const {
    const std::string* v = find(key);
    if (!v) return fallback;
    std::string expected;
    size_t i = 0;
    for (const auto& [name, value] : names) {
      if (*v == name) return value;
      expected += std::string(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + name;
      ++i;
    }
    refuse(key, *v, expected);
  }

  // Throws the InvalidArgument every accessor throws; for checks a plugin makes itself.
  [[noreturn]] void refuse(const std::string& key, const std::string& value, const std::string& expected) const {
    throw InvalidArgument(backend_ + " backend config " + key + "='" + value + "': expected " + expected);
  }

 private:
  const Map& config_;
  std::string backend_;
};

}  // namespace distcomm
