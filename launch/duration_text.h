// How the launcher's messages write a duration: "5s", "0.5s", "2.25s" (a setting, as its
// flag gives it), or "4.1 s" (a time measured).
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace distcomm {
namespace launch {

inline std::string seconds_text(std::chrono::milliseconds ms) {
  std::string s = std::to_string(ms.count() / 1000.0);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s + "s";
}

// "4.1 s": a measured duration, to a tenth of a second.
inline std::string tenths_text(std::chrono::steady_clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace launch
}  // namespace distcomm
