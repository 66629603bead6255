// Every read of the environment under api/ but run_main.cc's (environment.h says why).
#include "api/group/environment.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "api/errors.h"
#include "api/group/init_wait.h"
#include "api/diagnostics/json_text.h"
#include "api/diagnostics/timeline.h"
#include "api/diagnostics/trace_dump.h"
#include "api/process/rank_environment.h"

namespace distcomm {
namespace {

std::string env_str(const char* name) {
  const char* v = name ? std::getenv(name) : nullptr;
  return v ? v : "";
}

// An integer environment variable from `min` to 2^30, or -1 when unset (or unnamed);
// malformed or out of range is an error naming it. Sizes start at 1: WORLD_SIZE=0 passed
// this check as "from 0" and then failed init as "rank 0 is outside world size 0".
int env_int(const char* name, int min) {
  const std::string v = env_str(name);
  if (v.empty()) return -1;
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || x < min || x > 1 << 30) {
    throw InvalidArgument(std::string("environment variable ") + name + "='" + v + "' is not an integer from " +
                          std::to_string(min) + " to " + std::to_string(1 << 30));
  }
  return static_cast<int>(x);
}
int env_index(const char* name) { return env_int(name, 0); }  // a rank: from 0
int env_size(const char* name) { return env_int(name, 1); }   // a count of ranks: from 1

// "a:b::c" -> {"a", "b", "c"}.
std::vector<std::string> split_path(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t colon = s.find(':', start);
    const std::string part = s.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!part.empty()) parts.push_back(part);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return parts;
}

size_t trace_buffer(const std::string& v) {
  if (v.empty()) return FlightRecorder::kDefaultCapacity;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (*end != '\0' || errno != 0 || v[0] == '-' || n > 10000000) {
    throw InvalidArgument(std::string(kTraceBufferVariable) + "='" + v +
                          "': expected the number of ops each group keeps (0 turns the recorder off, at most "
                          "10000000)");
  }
  return static_cast<size_t>(n);
}

// Launchers in order of precedence, each with its names for rank, world size, local rank
// and local world size. The first whose rank (or world size) is set wins.
struct Launcher {
  const char* source;
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* local_world;
};

const Launcher kLaunchers[] = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
      // PMI-1/2 launchers (MPICH's mpiexec, srun --mpi=pmi2) and PMIx ones (prterun).
      {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
      {"pmix", "PMIX_RANK", nullptr, nullptr, nullptr},
};

}  // namespace

LaunchVariables launch_variables(const std::string& source) {
  for (const Launcher& l : kLaunchers) {
    if (source == l.source) return {l.rank, l.world ? l.world : ""};
  }
  return {"RANK", "WORLD_SIZE"};
}

LaunchEnv read_launch_env() {
  LaunchEnv e;
  for (const Launcher& l : kLaunchers) {
    if (env_index(l.rank) < 0 && env_size(l.world) < 0) continue;
    e.source = l.source;
    e.rank = env_index(l.rank);
    e.world_size = env_size(l.world);
    e.local_rank = env_index(l.local_rank);
    e.local_world_size = env_size(l.local_world);
    if (e.local_rank >= 0 && e.local_world_size >= 0 && e.local_rank >= e.local_world_size) {
      throw InvalidArgument(std::string("environment variable ") + l.local_rank + "=" + std::to_string(e.local_rank) +
                            " is not below " + l.local_world + "=" + std::to_string(e.local_world_size) +
                            ": a local rank counts from 0 among the ranks of its host");
    }
    break;
  }
  e.master_addr = env_str("MASTER_ADDR");
  const std::string master_port = env_str("MASTER_PORT");
  e.master_port = master_port.empty() ? -1 : parse_port("MASTER_PORT", master_port);
  return e;
}

bool launched_as_rank() { return !read_launch_env().source.empty(); }

JobIdentity identity_from_environment() { return {env_str(kRunIdVariable), env_str(kStoreTokenVariable)}; }

std::string backend_from_environment() { return env_str("DISTCOMM_BACKEND"); }

bool store_served_by_launcher_from_environment() {
  return parse_store_served_by_launcher(env_str(local::kStoreServedByVariable));
}

InitEnvironment InitEnvironment::read() {
  InitEnvironment e;
  e.launch = read_launch_env();
  e.backend = backend_from_environment();
  e.identity = identity_from_environment();
  e.store_bind = env_str(local::kStoreBindVariable);
  e.store_served_by = env_str(local::kStoreServedByVariable);
  e.debug = env_str("DISTCOMM_DEBUG");
  e.init_report_seconds = env_str("DISTCOMM_INIT_REPORT_SECONDS");
  e.process = ProcessEnvironment::read();
  return e;
}

std::chrono::milliseconds parse_report_seconds(const char* variable, const std::string& v,
                                               std::chrono::milliseconds otherwise) {
  if (v.empty()) return otherwise;
  char* end = nullptr;
  const double s = std::strtod(v.c_str(), &end);
  if (*end != '\0' || !(s > 0) || !std::isfinite(s) || s > 1e6) {
    throw InvalidArgument(std::string(variable) + "='" + v + "' is not a positive number of seconds (fractions allowed)");
  }
  return std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(s * 1000.0)));
}

std::chrono::milliseconds parse_init_report_seconds(const std::string& v) {
  return parse_report_seconds("DISTCOMM_INIT_REPORT_SECONDS", v, kDefaultInitReportInterval);
}

std::chrono::milliseconds init_report_interval_from_environment() {
  return parse_init_report_seconds(env_str("DISTCOMM_INIT_REPORT_SECONDS"));
}

std::chrono::milliseconds stall_report_interval(std::chrono::milliseconds otherwise) {
  return parse_report_seconds("DISTCOMM_STALL_REPORT_SECONDS", env_str("DISTCOMM_STALL_REPORT_SECONDS"), otherwise);
}

int parse_port(const std::string& what, const std::string& v) {
  if (v.empty() || v.size() > 5 || v.find_first_not_of("0123456789") != std::string::npos || std::stoi(v) > 65535) {
    throw InvalidArgument(what + "='" + v + "': expected a port in 1-65535, or 0 for rank 0's store to pick a free one");
  }
  return std::stoi(v);
}

bool parse_store_served_by_launcher(const std::string& v) {
  if (v.empty()) return false;
  if (v == local::kStoreServedByLauncher) return true;
  // Quoted with its control characters escaped: "launcher\n" stays on the message's one line.
  throw InvalidArgument(std::string(local::kStoreServedByVariable) + "=" + json_quote(v) + ": expected '" +
                        local::kStoreServedByLauncher +
                        "' (the launcher serves the job's store; tools/launch and spawn() set it), or unset (rank 0 "
                        "serves it)");
}

std::map<std::string, std::string> config_from_environment(const std::vector<ConfigKey>& keys) {
  std::map<std::string, std::string> values;
  for (const ConfigKey& key : keys) {
    if (key.env.empty()) continue;
    const std::string v = env_str(key.env.c_str());
    if (!v.empty()) values.emplace(key.name, v);
  }
  return values;
}

PluginSearch PluginSearch::from_environment() {
  PluginSearch s;
  s.plugin_path = split_path(env_str("DISTCOMM_PLUGIN_PATH"));
  for (const char* var : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* v = std::getenv(var)) s.runfiles_roots.push_back(v);
  }
  return s;
}

ProcessEnvironment ProcessEnvironment::read() {
  const std::string host_id = env_str("DISTCOMM_HOST_ID");
  // The placements the ranks exchange (group/auto_backend.h) end with "|nccl" where a
  // rank can run nccl: a host id with '|' could pass for that.
  if (host_id.find('|') != std::string::npos) {
    throw InvalidArgument("DISTCOMM_HOST_ID='" + host_id + "' contains '|'; pick a host id without it");
  }
  return {PluginSearch::from_environment(), TraceSettings::from_environment(), host_id};
}

TraceSettings TraceSettings::from_environment() {
  TraceSettings t;
  t.buffer = trace_buffer(env_str(kTraceBufferVariable));
  t.dump_dir = env_str(kTraceDirVariable);
  const std::string tmp = env_str("TMPDIR");
  t.default_dump_dir = (tmp.empty() ? std::string("/tmp") : tmp) + "/distcomm_trace";
  t.timeline_file = env_str(kTimelineVariable);
  t.run_id = env_str(kRunIdVariable);
  // As before: a RANK that does not start with a number names no rank.
  const std::string rank = env_str("RANK");
  try {
    if (!rank.empty()) t.launcher_rank = std::stoi(rank);
  } catch (const std::exception&) {
  }
  return t;
}

}  // namespace distcomm
