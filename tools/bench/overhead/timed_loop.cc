#include "tools/bench/overhead/timed_loop.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace distcomm {
namespace bench {
namespace {

struct Usage {
  double cpu_us = 0;
  double switches = 0;
};

// The whole process: getrusage(RUSAGE_SELF) adds up every thread (the library's own too).
Usage process_usage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto us = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec); };
  return {us(u.ru_utime) + us(u.ru_stime), static_cast<double>(u.ru_nvcsw + u.ru_nivcsw)};
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

RankLoop time_loop(const std::function<void()>& op, int warmup, int iters) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < warmup; ++i) op();
  RankLoop loop;
  loop.times_us.reserve(static_cast<size_t>(iters));
  const Usage before = process_usage();
  for (int i = 0; i < iters; ++i) {
    const auto start = Clock::now();
    op();
    loop.times_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  const Usage after = process_usage();
  loop.cpu_us_per_op = (after.cpu_us - before.cpu_us) / iters;
  loop.switches_per_op = (after.switches - before.switches) / iters;
  return loop;
}

std::vector<double> pack_rank_loop(const RankLoop& loop) {
  std::vector<double> v = loop.times_us;
  v.push_back(loop.cpu_us_per_op);
  v.push_back(loop.switches_per_op);
  return v;
}

RankLoop unpack_rank_loop(const double* values, int iters) {
  RankLoop loop;
  loop.times_us.assign(values, values + iters);
  loop.cpu_us_per_op = values[iters];
  loop.switches_per_op = values[iters + 1];
  return loop;
}

double bus_factor_of(const std::string& op, int nranks) {
  const double n = nranks;
  if (op == "all_reduce") return 2 * (n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter") return (n - 1) / n;
  return 1;  // broadcast
}

SizeResult summarize(const std::string& impl, const std::string& op, int64_t bytes,
                     const std::vector<RankLoop>& ranks) {
  SizeResult r;
  r.impl = impl;
  r.op = op;
  r.nranks = static_cast<int>(ranks.size());
  r.bytes = bytes;
  r.iters = ranks.empty() ? 0 : static_cast<int>(ranks[0].times_us.size());
  std::vector<double> slowest(static_cast<size_t>(r.iters), 0);
  for (const RankLoop& rank : ranks) {
    for (int i = 0; i < r.iters; ++i) slowest[i] = std::max(slowest[i], rank.times_us[i]);
    r.cpu_us_per_op += rank.cpu_us_per_op / r.nranks;
    r.switches_per_op += rank.switches_per_op / r.nranks;
  }
  r.median_us = median_of(slowest);
  for (double t : slowest) r.mean_us += t / std::max(1, r.iters);
  r.busbw = r.median_us > 0 ? static_cast<double>(bytes) / (r.median_us * 1e3) * bus_factor_of(op, r.nranks) : 0;
  return r;
}

std::string format_result(const SizeResult& r) {
  char buf[512];
  snprintf(buf, sizeof(buf),
           "impl=%s op=%s nranks=%d bytes=%lld iters=%d median_us=%.2f mean_us=%.2f busbw=%.4f cpu_us_per_op=%.2f "
           "switches_per_op=%.2f",
           r.impl.c_str(), r.op.c_str(), r.nranks, static_cast<long long>(r.bytes), r.iters, r.median_us, r.mean_us,
           r.busbw, r.cpu_us_per_op, r.switches_per_op);
  return buf;
}

SizeResult parse_result(const std::string& line) {
  std::map<std::string, std::string> fields;
  std::istringstream in(line);
  std::string item;
  while (in >> item) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos) fields[item.substr(0, eq)] = item.substr(eq + 1);
  }
  auto get = [&](const char* key) {
    auto it = fields.find(key);
    if (it == fields.end()) throw std::invalid_argument("not a result line (no " + std::string(key) + "=): " + line);
    return it->second;
  };
  SizeResult r;
  r.impl = get("impl");
  r.op = get("op");
  r.nranks = std::stoi(get("nranks"));
  r.bytes = std::stoll(get("bytes"));
  r.iters = std::stoi(get("iters"));
  r.median_us = std::stod(get("median_us"));
  r.mean_us = std::stod(get("mean_us"));
  r.busbw = std::stod(get("busbw"));
  r.cpu_us_per_op = std::stod(get("cpu_us_per_op"));
  r.switches_per_op = std::stod(get("switches_per_op"));
  return r;
}

namespace {
bool splits_by_rank(const std::string& op) { return op == "all_gather" || op == "reduce_scatter"; }
}  // namespace

int64_t op_param_count(const std::string& op, int64_t bytes, int nranks) {
  const int64_t total = bytes / 4;
  return std::max<int64_t>(1, splits_by_rank(op) ? total / nranks : total);
}

int64_t op_bytes(const std::string& op, int64_t bytes, int nranks) {
  return op_param_count(op, bytes, nranks) * 4 * (splits_by_rank(op) ? nranks : 1);
}

int64_t parse_bytes(const std::string& text, const std::string& flag) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
  }
  int64_t scale = 1;
  if (used + 1 == text.size()) {
    const char unit = text.back();
    scale = unit == 'K' ? 1 << 10 : unit == 'M' ? 1 << 20 : unit == 'G' ? 1 << 30 : 0;
  } else if (used != text.size()) {
    scale = 0;
  }
  if (v <= 0 || scale == 0) {
    throw std::invalid_argument(flag + " expects sizes like 8, 64K, 1M, got '" + text + "'");
  }
  return v * scale;
}

std::vector<int64_t> parse_byte_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> sizes;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    sizes.push_back(parse_bytes(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start), flag));
    if (comma == std::string::npos) return sizes;
    start = comma + 1;
  }
}

}  // namespace bench
}  // namespace distcomm
