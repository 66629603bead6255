// What a call that should be refused said: its InvalidArgument's text, or "accepted".
#pragma once

#include <string>

#include "api/errors.h"

namespace distcomm {
namespace testing {

template <typename Fn>
std::string refusal(Fn fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace testing
}  // namespace distcomm
