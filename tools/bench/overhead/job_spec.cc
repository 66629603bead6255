#include "tools/bench/overhead/job_spec.h"

#include <stdexcept>

#include "tools/bench/overhead/timed_loop.h"

namespace distcomm {
namespace bench {
namespace {

int positive(const std::string& flag, const std::string& value) {
  size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(value, &used);
  } catch (const std::exception&) {
  }
  if (used != value.size() || v <= 0) throw std::invalid_argument(flag + " expects a positive integer, got '" + value + "'");
  return v;
}

std::string join_sizes(const std::vector<int64_t>& sizes) {
  std::string s;
  for (int64_t b : sizes) s += (s.empty() ? "" : ",") + std::to_string(b);
  return s;
}

}  // namespace

int iterations_for(const JobSpec& spec, int64_t bytes) { return bytes >= (1 << 20) ? spec.large_iters : spec.iters; }

JobSpec parse_job_spec(std::vector<std::string>& args) {
  JobSpec s;
  std::vector<std::string> rest;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (name == "--nproc") s.nproc = positive(name, value);
    else if (name == "--iters") s.iters = positive(name, value);
    else if (name == "--large_iters") s.large_iters = positive(name, value);
    else if (name == "--warmup") s.warmup = positive(name, value);
    else if (name == "--sizes") s.sizes = parse_byte_list(value, name);
    else if (name == "--op") {
      if (value != "all_reduce" && value != "broadcast" && value != "all_gather" && value != "reduce_scatter") {
        throw std::invalid_argument("--op expects all_reduce, broadcast, all_gather or reduce_scatter, got '" + value + "'");
      }
      s.op = value;
    } else if (name == "--algorithm") {
      if (value != "ring" && value != "bcube") {
        throw std::invalid_argument("--algorithm expects ring or bcube (gloo::allreduce's algorithms), got '" + value + "'");
      }
      s.algorithm = value;
    } else {
      rest.push_back(arg);
    }
  }
  args.swap(rest);
  return s;
}

std::vector<std::string> job_spec_args(const JobSpec& spec) {
  return {"--nproc=" + std::to_string(spec.nproc),
          "--op=" + spec.op,
          "--algorithm=" + spec.algorithm,
          "--sizes=" + join_sizes(spec.sizes),
          "--iters=" + std::to_string(spec.iters),
          "--large_iters=" + std::to_string(spec.large_iters),
          "--warmup=" + std::to_string(spec.warmup)};
}

}  // namespace bench
}  // namespace distcomm
