// JSON lines for BenchRecord: written by the benchmark, read back by --plot. The objects
// are flat (strings, numbers, booleans, null), so a small reader covers them.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "api/errors.h"
#include "tools/bench/bench_record.h"

namespace distcomm {
namespace bench {
namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

// A JSON value of a flat object: a string, or the text of a number/true/false/null.
struct FlatValue {
  bool is_string = false;
  std::string text;
};

class FlatObjectReader {
 public:
  FlatObjectReader(const std::string& text, std::string where) : s_(text), where_(std::move(where)) {}

  std::map<std::string, FlatValue> read() {
    std::map<std::string, FlatValue> fields;
    expect('{');
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return fields;
    }
    while (true) {
      skip_space();
      const std::string key = read_string();
      expect(':');
      skip_space();
      FlatValue value;
      if (peek() == '"') {
        value.is_string = true;
        value.text = read_string();
      } else {
        const size_t start = pos_;
        while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != '}' && !std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
        value.text = s_.substr(start, pos_ - start);
        if (value.text.empty()) fail("a value");
      }
      fields[key] = value;
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return fields;
    }
  }

 private:
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument(where_ + ": expected " + what + " at column " + std::to_string(pos_ + 1));
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("'") + c + "'");
    ++pos_;
  }
  std::string read_string() {
    if (peek() != '"') fail("a string");
    ++pos_;
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\') {
        if (pos_ >= s_.size()) break;
        c = s_[pos_++];
        if (c == 'u' && pos_ + 4 <= s_.size()) {
          out += static_cast<char>(std::stoi(s_.substr(pos_, 4), nullptr, 16));
          pos_ += 4;
          continue;
        }
        if (c == 'n') c = '\n';
        if (c == 't') c = '\t';
      }
      out += c;
    }
    if (peek() != '"') fail("a closing quote");
    ++pos_;
    return out;
  }

  const std::string& s_;
  const std::string where_;
  size_t pos_ = 0;
};

class RecordFields {
 public:
  RecordFields(std::map<std::string, FlatValue> fields, std::string where)
      : fields_(std::move(fields)), where_(std::move(where)) {}

  std::string str(const std::string& key) const {
    const FlatValue* v = find(key);
    return v && v->is_string ? v->text : "";
  }
  // Missing or null numbers read as `missing`.
  double num(const std::string& key, double missing = 0) const {
    const FlatValue* v = find(key);
    if (v == nullptr || (!v->is_string && v->text == "null")) return missing;
    if (v->is_string) throw InvalidArgument(where_ + ": field '" + key + "' is a string, not a number");
    if (v->text == "true") return 1;
    if (v->text == "false") return 0;
    try {
      size_t used = 0;
      const double d = std::stod(v->text, &used);
      if (used == v->text.size()) return d;
    } catch (const std::exception&) {
    }
    throw InvalidArgument(where_ + ": field '" + key + "' is not a number: " + v->text);
  }
  void require(const std::string& key) const {
    if (find(key) == nullptr) throw InvalidArgument(where_ + ": missing field '" + key + "'");
  }

 private:
  const FlatValue* find(const std::string& key) const {
    auto it = fields_.find(key);
    return it == fields_.end() ? nullptr : &it->second;
  }
  std::map<std::string, FlatValue> fields_;
  std::string where_;
};

}  // namespace

std::string to_json(const BenchRecord& r) {
  std::ostringstream o;
  o << "{\"op\":" << quote(r.op) << ",\"backend\":" << quote(r.backend) << ",\"bytes\":" << r.bytes
    << ",\"requested_bytes\":" << r.requested_bytes
    << ",\"count\":" << r.count << ",\"dtype\":" << quote(r.dtype) << ",\"redop\":" << quote(r.redop)
    << ",\"root\":" << r.root << ",\"nranks\":" << r.nranks
    << ",\"inplace\":" << (r.inplace ? "true" : "false") << ",\"time_us\":" << number(r.time_us)
    << ",\"time_iter_mean_us\":" << number(r.time_iter_mean_us)
    << ",\"time_min_us\":" << number(r.time_min_us) << ",\"time_median_us\":" << number(r.time_median_us)
    << ",\"time_max_us\":" << number(r.time_max_us) << ",\"time_loop_us\":" << number(r.time_loop_us)
    << ",\"algbw\":" << number(r.algbw)
    << ",\"busbw\":" << number(r.busbw) << ",\"wrong\":" << (r.wrong < 0 ? "null" : std::to_string(r.wrong))
    << ",\"iters\":" << r.iters << ",\"timing\":" << quote(r.timing) << "}";
  return o.str();
}

std::vector<BenchRecord> records_from_json_lines(const std::string& text, const std::string& source) {
  std::vector<BenchRecord> records;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = source + ":" + std::to_string(number);
    RecordFields f(FlatObjectReader(line, where).read(), where);
    for (const char* key : {"op", "bytes", "busbw"}) f.require(key);
    BenchRecord r;
    r.op = f.str("op");
    r.backend = f.str("backend");
    r.bytes = static_cast<int64_t>(f.num("bytes"));
    r.count = static_cast<int64_t>(f.num("count"));
    r.requested_bytes = static_cast<int64_t>(f.num("requested_bytes", -1));
    r.dtype = f.str("dtype");
    r.redop = f.str("redop");
    r.root = static_cast<int>(f.num("root", -1));
    r.nranks = static_cast<int>(f.num("nranks"));
    r.inplace = f.num("inplace") != 0;
    r.time_us = f.num("time_us");
    r.time_iter_mean_us = f.num("time_iter_mean_us");
    r.time_min_us = f.num("time_min_us");
    r.time_median_us = f.num("time_median_us");
    r.time_max_us = f.num("time_max_us");
    r.time_loop_us = f.num("time_loop_us");
    r.algbw = f.num("algbw");
    r.busbw = f.num("busbw");
    r.wrong = static_cast<int64_t>(f.num("wrong", -1));
    r.iters = static_cast<int>(f.num("iters"));
    r.timing = f.str("timing");
    records.push_back(r);
  }
  return records;
}

}  // namespace bench
}  // namespace distcomm
