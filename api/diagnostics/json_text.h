// Writing JSON by hand: a string's quoted form. Header-only, so that tools which do not
// link the core (the launcher) can use it too.
#pragma once

#include <cstdio>
#include <string>

namespace distcomm {

// "text" with quotes, backslashes and control characters escaped.
inline std::string json_quote(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

}  // namespace distcomm
