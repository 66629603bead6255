// Where a tensor's memory lives: the host, or one CUDA device.
#pragma once

#include <string>

namespace distcomm {

enum class DeviceType { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;  // CUDA ordinal; 0 for the CPU

  static Device cpu() { return {}; }
  static Device cuda(int index) { return {DeviceType::kCUDA, index}; }
  // "cpu", "cuda", "cuda:1". Throws InvalidArgument otherwise.
  static Device parse(const std::string& s);

  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  std::string str() const;  // "cpu", "cuda:1"
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

const char* device_type_name(DeviceType t);  // "cpu", "cuda"
DeviceType parse_device_type(const std::string& s);

}  // namespace distcomm
