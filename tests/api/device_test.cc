// Device and device-type names: what backend specs ("cpu:gloo,cuda:nccl") and tools parse.
#include <gtest/gtest.h>

#include <typeinfo>

#include "api/device.h"
#include "api/errors.h"

namespace distcomm {
namespace {

TEST(DeviceType, ParsesAndNamesEachType) {
  EXPECT_EQ(parse_device_type("cpu"), DeviceType::kCPU);
  EXPECT_EQ(parse_device_type("cuda"), DeviceType::kCUDA);
  EXPECT_STREQ(device_type_name(DeviceType::kCPU), "cpu");
  EXPECT_STREQ(device_type_name(DeviceType::kCUDA), "cuda");
  for (DeviceType t : {DeviceType::kCPU, DeviceType::kCUDA}) EXPECT_EQ(parse_device_type(device_type_name(t)), t);
}

TEST(DeviceType, AnUnknownNameSaysWhatIsExpected) {
  for (const char* bad : {"", "CPU", "cuda:0", "tpu"}) {
    try {
      parse_device_type(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()), std::string("unknown device type '") + bad + "': expected 'cpu' or 'cuda'");
    }
  }
}

TEST(Device, ParsesIndexesAndRoundTrips) {
  const Device cuda1 = Device::parse("cuda:1");
  EXPECT_TRUE(cuda1.is_cuda());
  EXPECT_FALSE(cuda1.is_cpu());
  EXPECT_EQ(cuda1.index, 1);
  EXPECT_EQ(cuda1.str(), "cuda:1");
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  const Device cpu = Device::parse("cpu");
  EXPECT_TRUE(cpu.is_cpu());
  EXPECT_FALSE(cpu.is_cuda());
  EXPECT_EQ(cpu, Device::cpu());
  EXPECT_EQ(cpu.str(), "cpu");
  EXPECT_NE(Device::cuda(0), Device::cuda(1));
  EXPECT_THROW(Device::parse("cpu:1"), InvalidArgument);
  EXPECT_THROW(Device::parse("cuda:"), InvalidArgument);
  EXPECT_THROW(Device::parse("cuda:x"), InvalidArgument);
}

// Every malformed text is an InvalidArgument that names it and the forms taken, as
// device.h promises: "cuda:99999999999" was std::out_of_range("stoi"), naming neither.
TEST(Device, EveryMalformedTextIsAnInvalidArgumentNamingIt) {
  for (const char* bad : {"cuda:99999999999", "cuda:2147483648", "cuda:", "cuda:-1", "cuda:1x", "cuda:+1", "gpu:0",
                          " cuda:0", "cuda: 0", "cpu:1", "", ":0", "cuda:0:1"}) {
    try {
      Device::parse(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string("'") + bad + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("expected 'cpu', 'cuda' or 'cuda:<index>'"), std::string::npos) << what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "'" << bad << "': " << typeid(e).name() << ": " << e.what();
    }
  }
}

TEST(Device, TakesEveryIndexAnIntHolds) {
  EXPECT_EQ(Device::parse("cuda:2147483647").index, 2147483647);
  EXPECT_EQ(Device::parse("cuda:007").index, 7);
  EXPECT_EQ(Device::parse("cuda:0"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cpu:0"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda:000000000000000001").index, 1);
}

}  // namespace
}  // namespace distcomm
