#include "api/device.h"

#include <algorithm>
#include <limits>

#include "api/errors.h"

namespace distcomm {

const char* device_type_name(DeviceType t) { return t == DeviceType::kCPU ? "cpu" : "cuda"; }

DeviceType parse_device_type(const std::string& s) {
  if (s == "cpu") return DeviceType::kCPU;
  if (s == "cuda") return DeviceType::kCUDA;
  throw InvalidArgument("unknown device type '" + s + "': expected 'cpu' or 'cuda'");
}

Device Device::parse(const std::string& s) {
  // Every refusal names the whole text and the forms taken: "cuda:99999999999" reached
  // std::stoi, whose std::out_of_range("stoi") named neither.
  const auto bad = [&](const std::string& why) {
    return InvalidArgument("bad device '" + s + "': " + why + "; expected 'cpu', 'cuda' or 'cuda:<index>'");
  };
  const auto colon = s.find(':');
  Device d;
  try {
    d.type = parse_device_type(s.substr(0, colon));
  } catch (const InvalidArgument&) {
    throw bad("unknown device type '" + s.substr(0, colon) + "'");
  }
  if (colon != std::string::npos) {
    const std::string idx = s.substr(colon + 1);
    if (idx.empty() || idx.find_first_not_of("0123456789") != std::string::npos) {
      throw bad("the index after ':' must be a whole number, 0 or more");
    }
    // Digits only, so the one failure left is a number past int (std::stoi's out_of_range).
    const size_t first = std::min(idx.find_first_not_of('0'), idx.size() - 1);
    const std::string digits = idx.substr(first);
    const std::string int_max = std::to_string(std::numeric_limits<int>::max());
    if (digits.size() > int_max.size() || (digits.size() == int_max.size() && digits > int_max)) {
      throw bad("the index " + idx + " is larger than " + int_max);
    }
    d.index = std::stoi(digits);
    if (d.is_cpu() && d.index != 0) throw bad("cpu has no index");
  }
  return d;
}

std::string Device::str() const {
  return is_cpu() ? "cpu" : "cuda:" + std::to_string(index);
}

}  // namespace distcomm
