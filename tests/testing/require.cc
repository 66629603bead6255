#include "tests/testing/require.h"

#include <cstdlib>
#include <sstream>

namespace distcomm {
namespace testing {

bool required(const std::string& what) {
  const char* list = std::getenv("DISTCOMM_REQUIRE");
  if (!list) return false;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (item == what) return true;
  }
  return false;
}

std::string skip_heading(const std::string& what) {
  if (required(what)) {
    return "DISTCOMM_REQUIRE lists '" + what + "', so this test may not skip for want of it. It would have skipped:";
  }
  return "Skipped for want of '" + what + "':";
}

}  // namespace testing
}  // namespace distcomm
