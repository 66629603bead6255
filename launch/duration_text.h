// How the launcher's messages write a duration: "5s", "0.5s", "2.25s".
#pragma once

#include <chrono>
#include <string>

namespace distcomm {
namespace launch {

inline std::string seconds_text(std::chrono::milliseconds ms) {
  std::string s = std::to_string(ms.count() / 1000.0);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s + "s";
}

}  // namespace launch
}  // namespace distcomm
