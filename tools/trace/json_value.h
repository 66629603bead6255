// A small JSON reader for the files distcomm writes (trace dumps, timelines): objects,
// arrays, strings (with \uXXXX escapes of the basic plane), numbers, true, false, null.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace distcomm {
namespace trace {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;  // a string's value; a number's text as written (exact for large integers)
  std::vector<JsonValue> items;
  std::map<std::string, JsonValue> fields;

  bool is_object() const { return type == Type::kObject; }
  bool has(const std::string& key) const { return fields.count(key) != 0; }
  // A member; a null value when absent.
  const JsonValue& operator[](const std::string& key) const;
  // The member as a string / an integer (its text parsed exactly) / a double; fallback
  // when absent or of another type.
  std::string str(const std::string& key, const std::string& fallback = "") const;
  int64_t integer(const std::string& key, int64_t fallback = 0) const;
  double real(const std::string& key, double fallback = 0) const;
};

// Throws std::runtime_error naming `source` and the offset of the first thing that is not JSON.
JsonValue parse_json(const std::string& text, const std::string& source);
// A file's JSON; throws std::runtime_error when it cannot be read or is not JSON.
JsonValue parse_json_file(const std::string& path);

}  // namespace trace
}  // namespace distcomm
