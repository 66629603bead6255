#include "launch/launch_options.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace distcomm {
namespace launch {
namespace {

[[noreturn]] void reject(const std::string& flag, const std::string& value, const std::string& why) {
  throw std::invalid_argument("--" + flag + "=" + value + ": " + why);
}

}  // namespace

std::set<int> parse_rank_list(const std::string& text) {
  std::set<int> ranks;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    errno = 0;
    long r = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || r < 0 || r > 1000000) {
      reject("ranks_filter", text, "'" + item + "' is not a rank (expected e.g. 0,2,3)");
    }
    ranks.insert(static_cast<int>(r));
  }
  if (!text.empty() && text.back() == ',') reject("ranks_filter", text, "trailing comma");
  return ranks;
}

LaunchOptions::OnFailure parse_on_failure(const std::string& text) {
  if (text == "stop") return LaunchOptions::OnFailure::kStop;
  if (text == "continue") return LaunchOptions::OnFailure::kContinue;
  reject("on_failure", text, "expected stop (stop the other ranks) or continue (let them run on)");
}

void validate(const LaunchOptions& o) {
  if (o.command.empty() || o.command[0].empty()) {
    throw std::invalid_argument("no program to run: put it after '--', e.g. launch --nproc_per_node=2 -- ./my_program");
  }
  if (o.nproc_per_node < 1) reject("nproc_per_node", std::to_string(o.nproc_per_node), "must be at least 1");
  if (o.nnodes < 1) reject("nnodes", std::to_string(o.nnodes), "must be at least 1");
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    reject("node_rank", std::to_string(o.node_rank),
           "must be in [0, " + std::to_string(o.nnodes) + ") for --nnodes=" + std::to_string(o.nnodes));
  }
  if (o.master_port < 0 || o.master_port > 65535) {
    reject("master_port", std::to_string(o.master_port), "must be in [0, 65535] (0: pick a free port)");
  }
  if (o.master_addr.empty()) reject("master_addr", "", "must name the host of rank 0");
  if (o.nnodes > 1 && o.master_port == 0) {
    reject("master_port", "0", "with --nnodes > 1 every machine must be given the same port");
  }
  for (int r : o.ranks_filter) {
    if (r >= o.world_size()) {
      reject("ranks_filter", std::to_string(r),
             "no such rank in a world of " + std::to_string(o.world_size()));
    }
  }
  if (o.max_restarts < 0) {
    reject("max_restarts", std::to_string(o.max_restarts), "must be >= 0 (0: a failure ends the job)");
  }
  if (o.max_restarts > 0 && o.nnodes > 1) {
    reject("max_restarts", std::to_string(o.max_restarts),
           "with --nnodes=" + std::to_string(o.nnodes) + " the launchers of the machines must agree on "
           "each restart: give them --rdzv_endpoint (elastic mode)");
  }
  if (o.on_failure == LaunchOptions::OnFailure::kContinue && o.max_restarts > 0) {
    reject("on_failure", "continue",
           "with --max_restarts=" + std::to_string(o.max_restarts) + " a failure stops the ranks to restart the job");
  }
  if (o.replace_after.count() >= 0 && o.on_failure != LaunchOptions::OnFailure::kContinue) {
    reject("replace_after_s", std::to_string(o.replace_after.count() / 1000.0),
           "a replacement joins ranks that go on: it needs --on_failure=continue");
  }
  if (o.max_replacements < 0) {
    reject("max_replacements", std::to_string(o.max_replacements), "must be >= 0");
  }
  if (o.tee && o.log_dir.empty()) reject("tee", "true", "tee copies output to --log_dir, which is not set");
  if (o.dump_wait.count() < 0) reject("dump_wait_s", std::to_string(o.dump_wait.count() / 1000.0), "must be >= 0");
  // As --tee without --log_dir: a flag that would do nothing is refused, not ignored.
  if (o.dump_wait_given && o.trace_dir.empty() && o.inherited_trace_dir.empty()) {
    reject("dump_wait_s", std::to_string(o.dump_wait.count() / 1000.0),
           "the time the ranks get to write their trace dumps when the job is stopped: it needs --trace_dir "
           "(or DISTCOMM_TRACE_DIR in the environment)");
  }
  // Every rank appends to the timeline's file: a folder that is not there would fail each
  // rank's write at its end, after the job ran.
  if (!o.timeline.empty()) {
    const size_t slash = o.timeline.find_last_of('/');
    const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : o.timeline.substr(0, slash);
    struct stat st;
    if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      reject("timeline", o.timeline, "no folder " + folder + " to write it in (create it first)");
    }
    if (::access(folder.c_str(), W_OK | X_OK) != 0) {
      reject("timeline", o.timeline, "cannot write in " + folder + ": " + std::strerror(errno));
    }
  }
  if (o.grace_period.count() < 0) reject("grace_period_s", std::to_string(o.grace_period.count() / 1000.0), "must be >= 0");
  check_descriptor_limit(o);
}

int descriptors_per_rank(const LaunchOptions& o) { return 3 + (o.log_dir.empty() ? 0 : 1); }

long long store_connections(const LaunchOptions& o) {
  // Only node 0's launcher serves the store (attempt.cc), and every rank of the job, on
  // every machine, holds a connection to it; the other machines' launchers hold none.
  // (Elastic jobs' launchers serve no store: rank 0 does.)
  return o.serve_store && o.node_rank == 0 ? static_cast<long long>(o.world_size()) : 0;
}

namespace {

// Descriptors open in this process now (/proc/self/fd), or 0 when that cannot be read.
long long descriptors_open_now() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  long long n = 0;
  while (const dirent* e = ::readdir(dir)) n += e->d_name[0] != '.';
  ::closedir(dir);
  return n > 0 ? n - 1 : 0;  // not the one opendir holds
}

}  // namespace

long long descriptors_needed(const LaunchOptions& o, long long open_now) {
  // What is open already, and room for the launcher's own (its store's listener, a rank's
  // pipes while it starts, the log and trace files it opens).
  return open_now + 32 + static_cast<long long>(descriptors_per_rank(o)) * o.nproc_per_node + store_connections(o);
}

long long check_descriptor_limit(const LaunchOptions& o, long long soft, long long hard) {
  const long long needed = descriptors_needed(o, descriptors_open_now());
  rlimit rl{};
  const bool given = soft >= 0;
  if (!given) {
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    soft = rl.rlim_cur == RLIM_INFINITY ? -1 : static_cast<long long>(rl.rlim_cur);
    hard = rl.rlim_max == RLIM_INFINITY ? -1 : static_cast<long long>(rl.rlim_max);
    if (soft < 0) return -1;
  }
  if (needed <= soft) return soft;
  // The soft limit is raised as far as the job needs when the hard limit allows it, as
  // torchrun's users get (Python raises nothing, but many systems' soft default is the hard
  // one) and other launchers do. The ranks inherit the raised soft limit: that is fine, a
  // rank may raise its own soft limit up to the same hard one anyway.
  if (hard < 0 || needed <= hard) {
    if (!given) {
      rl.rlim_cur = static_cast<rlim_t>(needed);
      if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        reject("nproc_per_node", std::to_string(o.nproc_per_node),
               "cannot raise RLIMIT_NOFILE's soft limit from " + std::to_string(soft) + " to " +
                   std::to_string(needed) + ": " + std::strerror(errno));
      }
    }
    return needed;
  }
  const long long store = store_connections(o);
  const long long per_rank = descriptors_per_rank(o);
  const long long reserve = needed - per_rank * o.nproc_per_node - store;
  // Each rank on this machine costs its own descriptors and, on node 0, one connection per
  // machine (every machine runs as many ranks).
  const long long per_local_rank = per_rank + (store > 0 ? std::max(o.nnodes, 1) : 0);
  const long long fits = hard > reserve ? (hard - reserve) / per_local_rank : 0;
  reject("nproc_per_node", std::to_string(o.nproc_per_node),
         "the launcher holds " + std::to_string(per_rank) + " file descriptors per rank (its stdout and stderr pipes, " +
             "its pidfd" + (o.log_dir.empty() ? "" : ", its log file") + ")" +
             (store > 0 ? " and, serving the job's store, one connection per rank of the job (" + std::to_string(store) +
                              ")"
                        : std::string()) +
             ", " + std::to_string(needed) + " in all with its own, but even its hard limit (RLIMIT_NOFILE, ulimit -Hn) is " +
             std::to_string(hard) + " (soft " + std::to_string(soft) + "): at most " + std::to_string(fits) +
             " ranks fit on this machine; raise the hard limit (ulimit -Hn " + std::to_string(needed) +
             " as root, or limits.conf's nofile) or start fewer ranks");
}

}  // namespace launch
}  // namespace distcomm
