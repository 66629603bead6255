#include "backends/nccl/nccl_config.h"

#include <gtest/gtest.h>

#include "api/errors.h"

namespace distcomm {
namespace nccl {
namespace {

TEST(NcclConfigTest, DefaultsAreStreamWaitLazyNonblocking) {
  const NcclConfig c = NcclConfig::parse({});
  EXPECT_FALSE(c.blocking_wait);
  EXPECT_FALSE(c.eager_init);
  EXPECT_TRUE(c.nonblocking);
  EXPECT_EQ(c.device_id, -1);
  EXPECT_EQ(c.local_rank, -1);
  EXPECT_EQ(c.watchdog_poll, std::chrono::microseconds(1000));
  EXPECT_EQ(c.shutdown_grace, std::chrono::milliseconds(10000));
}

TEST(NcclConfigTest, ReadsItsKeysAndIgnoresOtherBackends) {
  const NcclConfig c = NcclConfig::parse({{"blocking_wait", "true"},
                                          {"eager_init", "1"},
                                          {"nonblocking", "off"},
                                          {"device_id", "3"},
                                          {"local_rank", "5"},
                                          {"watchdog_poll_us", "250"},
                                          {"shutdown_grace_ms", "0"},
                                          {"ifname", "eth0"}});  // gloo's, in a mixed group
  EXPECT_TRUE(c.blocking_wait);
  EXPECT_TRUE(c.eager_init);
  EXPECT_FALSE(c.nonblocking);
  EXPECT_EQ(c.device_id, 3);
  EXPECT_EQ(c.local_rank, 5);
  EXPECT_EQ(c.watchdog_poll, std::chrono::microseconds(250));
  EXPECT_EQ(c.shutdown_grace, std::chrono::milliseconds(0));
}

TEST(NcclConfigTest, BadValuesNameTheKeyAndWhatItAccepts) {
  auto message = [](const std::string& key, const std::string& value) -> std::string {
    try {
      NcclConfig::parse({{key, value}});
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message("blocking_wait", "maybe"),
            "nccl backend config blocking_wait='maybe': expected 1/0, true/false, yes/no or on/off");
  EXPECT_NE(message("device_id", "gpu0").find("device_id='gpu0'"), std::string::npos);
  EXPECT_NE(message("device_id", "-2").find("a CUDA device index"), std::string::npos);
  EXPECT_NE(message("watchdog_poll_us", "5").find("[10, 10000000]"), std::string::npos);
  EXPECT_NE(message("eager_init", "").find("eager_init=''"), std::string::npos);
  EXPECT_NE(message("shutdown_grace_ms", "-1").find("[0, 3600000]"), std::string::npos);
}

}  // namespace
}  // namespace nccl
}  // namespace distcomm
