#include "backends/mpi/mpi_config.h"

#include "api/plugin/config_reader.h"

namespace distcomm {
namespace mpi {

const distcomm_config_key kConfigKeys[] = {
    {"max_count_per_call", "2147483647", nullptr,
     "elements per MPI call (MPI counts are int); larger all_reduce, reduce, broadcast, send, recv and "
     "recv_any_source are split into several calls (set it alike on every rank); all_to_all is limited per"
     " peer (each peer's count at most this, its block offset at most 2147483647, the total may be "
     "larger), all_gather, gather, scatter and reduce_scatter per rank (at most this many elements per "
     "rank), and larger ones are refused before anything is sent: split them into several ops or use gloo "
     "or shm"},
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

MpiConfig MpiConfig::parse(const std::map<std::string, std::string>& config) {
  MpiConfig c;
  const ConfigReader r(config, "mpi");
  c.max_count_per_call = r.integer("max_count_per_call", c.max_count_per_call, 1, INT_MAX);
  c.waiters_drive = r.choice("progress", c.waiters_drive, {{"waiters", true}, {"thread", false}});
  c.iallreduce_algorithm = static_cast<int>(r.integer("iallreduce_algorithm", c.iallreduce_algorithm, 0, 100));
  c.agreement_check = r.boolean("agreement_check", c.agreement_check);
  c.local_ranks = static_cast<int>(r.integer("local_world_size", c.local_ranks, 1, INT_MAX));
  c.launcher = r.text("launcher", c.launcher);
  return c;
}

}  // namespace mpi
}  // namespace distcomm
