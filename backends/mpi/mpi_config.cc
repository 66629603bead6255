#include "backends/mpi/mpi_config.h"

#include "api/errors.h"

namespace distcomm {
namespace mpi {

const distcomm_config_key kConfigKeys[] = {
    {"max_count_per_call", "2147483647", nullptr,
     "elements per MPI call (MPI counts are int); larger all_reduce, reduce, broadcast, send and recv are "
     "split into several calls"},
    {"progress", "waiters", nullptr,
     "who calls MPI for small ops: 'waiters' (the threads that submit and wait, with MPI_THREAD_MULTIPLE) or "
     "'thread' (only the plugin's MPI thread); the first group of the process decides"},
    {"iallreduce_algorithm", "3", nullptr,
     "Open MPI's nonblocking all_reduce algorithm (MCA coll_libnbc_iallreduce_algorithm), set after MPI_Init "
     "when nobody chose one: 3 is reduce-scatter + allgather, 0 keeps Open MPI's choice (a binomial tree for "
     "every in-place call)"},
    {"agreement_check", "1", "DISTCOMM_MPI_AGREEMENT_CHECK",
     "1: before each collective the ranks compare a hash of the op they call (one 16-byte MPI_Iallreduce), so "
     "ranks that disagree (counts, dtype, root, reduction, a skipped op) all get Desync instead of a crash or wrong "
     "values; 0: off, faster for small ops, and a disagreement is undefined behaviour in MPI (same on every rank)"},
    {nullptr, nullptr, nullptr, nullptr},
};

namespace {

int64_t parse_integer(const std::string& key, const std::string& text, int64_t min, int64_t max) {
  int64_t value = min - 1;
  try {
    size_t used = 0;
    value = std::stoll(text, &used);
    if (used != text.size()) value = min - 1;
  } catch (const std::exception&) {
  }
  if (value < min || value > max) {
    throw InvalidArgument("mpi backend: config " + key + "='" + text + "' must be an integer from " +
                          std::to_string(min) + " to " + std::to_string(max));
  }
  return value;
}

}  // namespace

MpiConfig MpiConfig::parse(const std::map<std::string, std::string>& config) {
  MpiConfig c;
  for (const auto& [key, value] : config) {
    if (key == "max_count_per_call") {
      c.max_count_per_call = parse_integer(key, value, 1, INT_MAX);
    } else if (key == "progress") {
      if (value != "waiters" && value != "thread") {
        throw InvalidArgument("mpi backend: config progress='" + value + "' must be 'waiters' or 'thread'");
      }
      c.waiters_drive = value == "waiters";
    } else if (key == "iallreduce_algorithm") {
      c.iallreduce_algorithm = static_cast<int>(parse_integer(key, value, 0, 100));
    } else if (key == "agreement_check") {
      c.agreement_check = parse_integer(key, value, 0, 1) == 1;
    } else if (key == "local_world_size") {
      c.local_ranks = static_cast<int>(parse_integer(key, value, 1, INT_MAX));
    } else if (key == "launcher") {
      c.launcher = value;
    }
  }
  return c;
}

}  // namespace mpi
}  // namespace distcomm
