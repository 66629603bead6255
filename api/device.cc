#include "api/device.h"

#include "api/errors.h"

namespace distcomm {

const char* device_type_name(DeviceType t) { return t == DeviceType::kCPU ? "cpu" : "cuda"; }

DeviceType parse_device_type(const std::string& s) {
  if (s == "cpu") return DeviceType::kCPU;
  if (s == "cuda") return DeviceType::kCUDA;
  throw InvalidArgument("unknown device type '" + s + "': expected 'cpu' or 'cuda'");
}

Device Device::parse(const std::string& s) {
  const auto colon = s.find(':');
  Device d;
  d.type = parse_device_type(s.substr(0, colon));
  if (colon != std::string::npos) {
    const std::string idx = s.substr(colon + 1);
    if (idx.empty() || idx.find_first_not_of("0123456789") != std::string::npos) {
      throw InvalidArgument("bad device '" + s + "': the index after ':' must be a number");
    }
    d.index = std::stoi(idx);
    if (d.is_cpu() && d.index != 0) throw InvalidArgument("bad device '" + s + "': cpu has no index");
  }
  return d;
}

std::string Device::str() const {
  return is_cpu() ? "cpu" : "cuda:" + std::to_string(index);
}

}  // namespace distcomm
