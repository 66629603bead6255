#include "api/group/init_method.h"

#include <cerrno>
#include <cstdlib>

#include "api/errors.h"

namespace distcomm {
namespace {

int number_of(const std::string& init_method, const std::string& key, const std::string& text, int min) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < min || v > (1 << 30)) {
    throw InvalidArgument("init_method '" + init_method + "': " + key + "='" + text + "' is not an integer from " +
                          std::to_string(min) + " to " + std::to_string(1 << 30));
  }
  return static_cast<int>(v);
}

}  // namespace

InitMethodParts split_init_method(const std::string& init_method) {
  InitMethodParts parts;
  const size_t question = init_method.find('?');
  parts.method = init_method.substr(0, question);
  // torch's form of a TCP address may end in '/' (tcp://host:port/); a path's may not lose it.
  if (parts.method.rfind("tcp://", 0) == 0 && parts.method.size() > 6 && parts.method.back() == '/') {
    parts.method.pop_back();
  }
  if (question == std::string::npos) return parts;
  const std::string query = init_method.substr(question + 1);
  size_t at = 0;
  while (at <= query.size()) {
    const size_t amp = query.find('&', at);
    const std::string item = query.substr(at, amp == std::string::npos ? std::string::npos : amp - at);
    at = amp == std::string::npos ? query.size() + 1 : amp + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "rank") {
      parts.rank = number_of(init_method, key, value, 0);
    } else if (key == "world_size") {
      parts.world_size = number_of(init_method, key, value, 1);
    } else if (key == "use_libuv") {
      // torch's choice of its own store's event loop: nothing here to choose.
    } else {
      throw InvalidArgument("init_method '" + init_method + "': unknown setting '" + key +
                            "' in its query (expected rank and world_size, as torch takes them)");
    }
  }
  return parts;
}

int agreed_value(const std::string& what, int from_program, int from_query, int from_environment,
                 const std::string& init_method) {
  if (from_query < 0) return from_program >= 0 ? from_program : from_environment;
  if (from_program >= 0 && from_program != from_query) {
    throw InvalidArgument("init_process_group: init_method '" + init_method + "' says " + what + " " +
                          std::to_string(from_query) + ", InitOptions " + std::to_string(from_program) +
                          ": give it once");
  }
  return from_query;  // over the environment's: a worker forked by a launched process inherits its RANK
}

}  // namespace distcomm
