// How messages write a duration: "12.5 s".
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace distcomm {

inline std::string seconds_text(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

}  // namespace distcomm
