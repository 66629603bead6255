#include "tools/trace/json_value.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace distcomm {
namespace trace {
namespace {

class Parser {
 public:
  Parser(const std::string& s, const std::string& source) : s_(s), source_(source) {}

  JsonValue document() {
    JsonValue v = value(0);
    skip_space();
    if (pos_ != s_.size()) fail("text after the end of the document");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(source_ + ": not valid JSON at byte " + std::to_string(pos_) + ": " + what);
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  char peek() {
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end");
    return s_[pos_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (s_.compare(pos_, w.size(), w) != 0) return false;
    pos_ += w.size();
    return true;
  }

  JsonValue value(int depth) {
    if (depth > 64) fail("nested too deeply");
    JsonValue v;
    const char c = peek();
    if (c == '{') {
      v.type = JsonValue::Type::kObject;
      ++pos_;
      if (peek() == '}') {
        ++pos_;
        return v;
      }
      while (true) {
        if (peek() != '"') fail("expected a member name");
        std::string key = string();
        expect(':');
        v.fields[key] = value(depth + 1);
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.type = JsonValue::Type::kArray;
      ++pos_;
      if (peek() == ']') {
        ++pos_;
        return v;
      }
      while (true) {
        v.items.push_back(value(depth + 1));
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.type = JsonValue::Type::kString;
      v.text = string();
      return v;
    }
    if (literal("true") || literal("false")) {
      v.type = JsonValue::Type::kBool;
      v.boolean = s_[pos_ - 1] == 'e' && s_[pos_ - 2] == 'u';
      return v;
    }
    if (literal("null")) return v;
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '-' ||
                                s_[pos_] == '+' || s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
    }
    if (start == pos_) fail("unexpected character");
    v.type = JsonValue::Type::kNumber;
    v.text = s_.substr(start, pos_ - start);
    char* end = nullptr;
    v.number = std::strtod(v.text.c_str(), &end);
    if (end != v.text.c_str() + v.text.size()) fail("bad number '" + v.text + "'");
    return v;
  }

  std::string string() {
    ++pos_;  // the opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (pos_ + 4 > s_.size()) fail("short \\u escape");
          const unsigned code = static_cast<unsigned>(std::strtoul(s_.substr(pos_, 4).c_str(), nullptr, 16));
          pos_ += 4;
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default: fail(std::string("unknown escape \\") + e);
      }
    }
  }

  const std::string& s_;
  const std::string& source_;
  size_t pos_ = 0;
};

const JsonValue& null_value() {
  static const JsonValue v;
  return v;
}

}  // namespace

const JsonValue& JsonValue::operator[](const std::string& key) const {
  auto it = fields.find(key);
  return it == fields.end() ? null_value() : it->second;
}

std::string JsonValue::str(const std::string& key, const std::string& fallback) const {
  const JsonValue& v = (*this)[key];
  return v.type == Type::kString ? v.text : fallback;
}

int64_t JsonValue::integer(const std::string& key, int64_t fallback) const {
  const JsonValue& v = (*this)[key];
  if (v.type != Type::kNumber) return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(v.text.c_str(), &end, 10);
  return *end == '\0' ? n : static_cast<int64_t>(v.number);
}

double JsonValue::real(const std::string& key, double fallback) const {
  const JsonValue& v = (*this)[key];
  return v.type == Type::kNumber ? v.number : fallback;
}

JsonValue parse_json(const std::string& text, const std::string& source) { return Parser(text, source).document(); }

JsonValue parse_json_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_json(ss.str(), path);
}

}  // namespace trace
}  // namespace distcomm
