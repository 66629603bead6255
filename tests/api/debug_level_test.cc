#include <gtest/gtest.h>

#include "api/debug_level.h"
#include "api/errors.h"

namespace distcomm {
namespace {

TEST(DebugLevel, ParsesTheThreeLevelsInAnyCase) {
  EXPECT_EQ(parse_debug_level(""), DebugLevel::kOff);
  EXPECT_EQ(parse_debug_level("off"), DebugLevel::kOff);
  EXPECT_EQ(parse_debug_level("INFO"), DebugLevel::kInfo);
  EXPECT_EQ(parse_debug_level("Detail"), DebugLevel::kDetail);
  EXPECT_STREQ(debug_level_name(DebugLevel::kDetail), "DETAIL");
}

TEST(DebugLevel, RefusesOtherValuesNamingThem) {
  try {
    parse_debug_level("VERBOSE");
    FAIL() << "accepted VERBOSE";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'VERBOSE'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("OFF, INFO or DETAIL"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace distcomm
