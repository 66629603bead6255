#include "api/group/auto_backend.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "api/diagnostics/op_fingerprint.h"  // rank_list_text
#include "api/errors.h"
#include "api/group/auto_shm_fit.h"
#include "api/group/shm_segment_fits.h"
#include "api/logging.h"
#include "api/plugin/plugin_registry.h"

namespace distcomm {
namespace {

constexpr char kShmReady[] = " shm";
constexpr char kNcclPart[] = "|nccl";
constexpr char kMpiPart[] = "|mpi";
constexpr char kAcrossPart[] = "|across=";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// This process's effective user, as the placement carries it. shm maps a peer's segment
// through /proc/<pid>/fd/<n>, which the kernel opens only for the peer's own user (or one
// with ptrace rights over it): ranks of one host but different users cannot share memory
// (root could open nobody's, never the reverse), so the user is part of what makes "one
// host" for auto and the hierarchy, and such ranks go over gloo between them.
std::string placement_user() { return " uid " + std::to_string(::geteuid()); }

}  // namespace

std::string shared_memory_domain() {
  std::string domain;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), domain);
  char ns[64];
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  if (n > 0) domain += " " + std::string(ns, static_cast<size_t>(n));
  return domain;
}

std::string process_domain() {
  std::string domain = shared_memory_domain();
  char ns[64];
  const ssize_t n = ::readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
  // Unreadable (no /proc): a domain of this process alone, so that no peer matches it --
  // an unknown part must not compare equal to another host's unknown part.
  domain += " net " + (n > 0 ? std::string(ns, static_cast<size_t>(n)) : "? pid " + std::to_string(::getpid()) + " at " +
                                     std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  const std::string host_id = ProcessEnvironment::read().host_id;
  if (!host_id.empty()) domain += " host " + host_id;
  // The domain ends at the published text's last newline: none inside it.
  std::replace(domain.begin(), domain.end(), '\n', ' ');
  return domain;
}

namespace {

// Why this process cannot use shm, as the last shm_plugin() saw it ("" when it can, or when
// no shm plugin is installed).
std::mutex g_shm_unused_mutex;
std::string g_shm_unused;

// A reason that is one of this process's limits (ulimit -n, ulimit -f), not the install.
bool names_descriptor_limit(const std::string& why) {
  return why.find(std::strerror(EMFILE)) != std::string::npos || why.find(std::strerror(ENFILE)) != std::string::npos;
}

void keep_shm_unused(const std::string& why) {
  const std::lock_guard<std::mutex> lock(g_shm_unused_mutex);
  g_shm_unused = why;
}

}  // namespace

// An shm plugin that is there but refused (a damaged or half-copied install, a file of
// another build, or a process out of descriptors for dlopen) makes auto run gloo between the
// ranks of a host: a job that works, several times slower, with nothing said. Said once per
// process, with the file and why; an install without any shm plugin says nothing (it was
// built so).
void say_shm_refused(const std::string& load_error) {
  const size_t refused = load_error.find(": refused: ");
  if (refused == std::string::npos) return;
  const size_t start = load_error.rfind('\n', refused);
  const size_t end = load_error.find('\n', refused);
  std::string line = load_error.substr(start == std::string::npos ? 0 : start + 1,
                                       end == std::string::npos ? std::string::npos : end - start - 1);
  line = line.substr(line.find_first_not_of(' '));
  const std::string fix = names_descriptor_limit(line)
                              ? "; this process ran out of file descriptors: raise `ulimit -n` (RLIMIT_NOFILE)"
                              : "; reinstall distcomm or fix DISTCOMM_PLUGIN_PATH";
  keep_shm_unused("the shm plugin cannot be loaded: " + line + fix);
  static std::once_flag said;
  std::call_once(said, [&] {
    log_line("warning: auto: the shm plugin cannot be loaded, so ranks of one host use gloo between them (much "
             "slower): " + line + fix);
  });
}

// The plugin loaded but cannot run here (its available() probe): said once where the cause
// is a limit of this process (ulimit -n, ulimit -f), which the user can raise.
void say_shm_unavailable(const std::string& why) {
  keep_shm_unused("shm cannot run here: " + why);
  if (!names_descriptor_limit(why) && why.find("ulimit") == std::string::npos) return;
  static std::once_flag said;
  std::call_once(said, [&] {
    log_line("warning: auto: shm cannot run here, so ranks of one host use gloo between them (much slower): " + why);
  });
}

// The shm plugin could not be looked for or loaded because this process has no descriptor
// left: said once, with the limit to raise (gloo then fails the same way, or runs slower).
void say_shm_without_descriptors(int err) {
  const std::string why = std::string("the shm plugin cannot be looked for or loaded: ") + std::strerror(err) +
                          (err == EMFILE ? ": this process ran out of file descriptors (RLIMIT_NOFILE): raise `ulimit -n`"
                                         : ": the system's table of open files is full (fs.file-max)");
  keep_shm_unused(why);
  static std::once_flag said;
  std::call_once(said, [&] {
    log_line("warning: auto: ranks of one host use gloo between them (much slower), as " + why);
  });
}

// The plugin's own answer (distcomm_shm_segment_fits, shm_plugin.cc) to whether a rank's
// segment of a group of `group_size` ranks with `config` fits this process's file size limit:
// its probe (info.available) sizes a two-rank group only, and a segment grows with the group,
// so under a limit between the two auto picked shm and the creation then failed. "" when it
// fits, or when the plugin has no such answer (one built before it: its probe stands).
std::string shm_segment_refusal(const PluginInfo& info, int group_size, const std::map<std::string, std::string>& config) {
  void* handle = ::dlopen(info.path.c_str(), RTLD_NOW | RTLD_NOLOAD);  // the copy load_plugin holds
  if (handle == nullptr) return "";
  // The type both sides include (shm_segment_fits.h): the plugin's definition is checked against it.
  const auto fits = reinterpret_cast<ShmSegmentFits*>(::dlsym(handle, kShmSegmentFitsSymbol));
  std::string why;
  const bool refused = fits != nullptr && fits(group_size, &config, &why) == 0;
  ::dlclose(handle);  // drops only the reference RTLD_NOLOAD took
  return refused ? (why.empty() ? std::string("a rank's segment does not fit this process's limits") : why) : "";
}

// Whether the shm plugin loads (and, with `runs`, can run here: for a group of
// `group_size` ranks with `config`, when group_size > 0).
bool shm_plugin(bool runs, const PluginSearch& plugins, int group_size = 0,
                const std::map<std::string, std::string>& config = {}) {
  try {
    const PluginInfo& info = load_plugin("shm", plugins);
    if (runs && !info.available) say_shm_unavailable(info.unavailable_reason);
    if (runs && info.available && group_size > 0) {
      const std::string refused = shm_segment_refusal(info, group_size, config);
      if (!refused.empty()) {
        say_shm_unavailable(refused);
        return false;
      }
    }
    return !runs || info.available;
  } catch (const BackendUnavailable& e) {
    // Out of descriptors, the plugin folder cannot even be listed (the plugin then reads as
    // not installed, and auto went to gloo in silence): one descriptor asked for says so.
    const int probe = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const int err = errno;
    if (probe >= 0) ::close(probe);
    if (probe < 0 && (err == EMFILE || err == ENFILE)) {
      say_shm_without_descriptors(err);
    } else {
      say_shm_refused(e.what());
    }
    return false;
  }
}

std::string why_shm_unused() {
  const std::lock_guard<std::mutex> lock(g_shm_unused_mutex);
  return g_shm_unused;
}

bool cuda_device_node_present() {
  glob_t found{};
  const bool any = ::glob("/dev/nvidia[0-9]*", 0, nullptr, &found) == 0 && found.gl_pathc > 0;
  ::globfree(&found);
  return any;
}

// Whether the mpi plugin loads and can run here.
bool mpi_plugin_runs(const PluginSearch& plugins) {
  try {
    return load_plugin("mpi", plugins).available;
  } catch (const BackendUnavailable&) {
    return false;
  }
}

// Whether the nccl plugin loads (and, with `runs`, can run here), asked only with a GPU.
bool nccl_plugin(bool runs, const PluginSearch& plugins) {
  if (!cuda_device_node_present()) return false;
  try {
    const PluginInfo& info = load_plugin("nccl", plugins);
    return !runs || info.available;
  } catch (const BackendUnavailable&) {
    return false;
  }
}

std::string why_nccl_unused(const PluginSearch& plugins) {
  if (!cuda_device_node_present()) return "this process sees no CUDA device (no /dev/nvidia<N> device node)";
  try {
    const PluginInfo& info = load_plugin("nccl", plugins);
    if (info.available) return "";
    return "the nccl plugin cannot run here: " +
           (info.unavailable_reason.empty() ? std::string("(it gave no reason)") : info.unavailable_reason);
  } catch (const BackendUnavailable& e) {
    return std::string("the nccl plugin cannot be loaded: ") + e.what();
  }
}

std::string why_auto_left_out_nccl(const ExchangedPlacements& placements, int rank, const PluginSearch& plugins) {
  std::vector<int> without;
  for (size_t r = 0; r < placements.runs_nccl.size(); ++r) {
    if (!placements.runs_nccl[r]) without.push_back(static_cast<int>(r));
  }
  if (without.empty()) return "";
  const bool here = std::find(without.begin(), without.end(), rank) != without.end();
  std::string why = "backend 'auto' sends cuda tensors to nccl only where every rank can run it, and rank" +
                    std::string(without.size() > 1 ? "s " : " ") + rank_list_text(without) + " cannot";
  if (here) why += " (here, rank " + std::to_string(rank) + ": " + why_nccl_unused(plugins) + ")";
  return why + "; for cuda tensors, run every rank where nccl runs, or name it: 'cpu:auto,cuda:nccl'";
}

std::string auto_backend_placement_for_group(const PluginSearch& plugins, const std::string& host_id, bool ask_nccl,
                                             bool ask_mpi, const std::string& hier_across, int shm_group_size,
                                             const std::map<std::string, std::string>& shm_config) {
  return shared_memory_domain() + placement_user() + (host_id.empty() ? "" : " host " + host_id) +
         (shm_plugin(true, plugins, shm_group_size, shm_config) ? kShmReady : "") +
         (hier_across.empty() ? "" : kAcrossPart + hier_across) +
         (ask_mpi && mpi_plugin_runs(plugins) ? kMpiPart : "") + (ask_nccl && nccl_plugin(true, plugins) ? kNcclPart : "");
}

// The plugin ABI's entry point (auto_backend.h), with the meaning it had: a group of two.
std::string auto_backend_placement(const PluginSearch& plugins, const std::string& host_id, bool ask_nccl,
                                   bool ask_mpi, const std::string& hier_across) {
  return auto_backend_placement_for_group(plugins, host_id, ask_nccl, ask_mpi, hier_across, 0, {});
}

int shm_ranks_to_judge(const std::string& backend, int group_size, int local_world_size) {
  if (local_world_size > 0) return std::min(group_size, local_world_size);
  return backend == "auto" ? group_size : 0;
}

std::string machine_of_placement(const std::string& placement) {
  const size_t user = placement.find(" uid ");
  if (user == std::string::npos) return placement;
  const size_t end = placement.find_first_not_of("0123456789", user + 5);
  return placement.substr(0, user) + (end == std::string::npos ? "" : placement.substr(end));
}

ExchangedPlacements split_placements(const std::vector<std::string>& exchanged) {
  ExchangedPlacements out;
  out.all_run_nccl = !exchanged.empty();
  for (const std::string& p : exchanged) {
    const bool nccl = ends_with(p, kNcclPart);
    std::string cpu = nccl ? p.substr(0, p.size() - std::strlen(kNcclPart)) : p;
    const bool mpi = ends_with(cpu, kMpiPart);
    if (mpi) cpu.resize(cpu.size() - std::strlen(kMpiPart));
    const size_t across = cpu.rfind(kAcrossPart);
    out.hier_across.push_back(across == std::string::npos ? "" : cpu.substr(across + std::strlen(kAcrossPart)));
    if (across != std::string::npos) cpu.resize(across);
    out.cpu.push_back(std::move(cpu));
    out.runs_mpi.push_back(mpi);
    out.all_run_nccl = out.all_run_nccl && nccl;
    out.runs_nccl.push_back(nccl);
  }
  return out;
}

std::vector<std::string> auto_backend_candidates(const PluginSearch& plugins, bool with_nccl) {
  std::vector<std::string> names;
  const bool shm = shm_plugin(false, plugins);
  if (shm) names.push_back("shm");
  // gloo only where it loads, unless nothing else does: an install without gloo runs a
  // one-host job over shm; a job that needs gloo (across hosts) fails when it picks it,
  // naming the missing plugin then.
  bool gloo = true;
  if (shm) {
    try {
      load_plugin("gloo", plugins);
    } catch (const BackendUnavailable&) {
      gloo = false;
    }
  }
  if (gloo) names.push_back("gloo");
  if (with_nccl && nccl_plugin(false, plugins)) names.push_back("nccl");
  return names;
}

AutoChoice choose_auto(const std::string& spec_text, bool plan_has_cuda, const ExchangedPlacements& placements) {
  AutoChoice c;
  c.cpu = choose_auto_cpu_backend(placements.cpu);
  c.with_nccl = spec_text == "auto" && !plan_has_cuda && placements.all_run_nccl;
  if (c.cpu != "hier") {
    c.label = " (cpu: " + c.cpu + (c.with_nccl ? ", cuda: nccl)" : ")");
  } else if (c.with_nccl) {
    c.label = " (cuda: nccl)";
  }
  return c;
}

std::string why_not_hierarchical(const std::vector<std::string>& placements) {
  std::set<std::string> hosts;
  for (size_t r = 0; r < placements.size(); ++r) {
    if (!ends_with(placements[r], kShmReady)) return "rank " + std::to_string(r) + " cannot run shm";
    hosts.insert(placements[r]);
  }
  if (hosts.size() < 2) return "one host";
  if (hosts.size() == placements.size()) return "one rank per host";
  return "";
}

std::string choose_auto_cpu_backend(const std::vector<std::string>& placements) {
  bool one_place = true;
  for (const std::string& p : placements) one_place = one_place && p == placements.front();
  if (one_place && ends_with(placements.front(), kShmReady)) return "shm";
  return why_not_hierarchical(placements).empty() ? "hier" : "gloo";
}

void check_hier_across(const std::string& where, const std::string& setting) {
  if (setting != "auto" && setting != "gloo" && setting != "mpi") {
    throw InvalidArgument(where + ": backend config key 'hier_across' (DISTCOMM_HIER_ACROSS) = '" + setting +
                          "': expected auto, gloo or mpi");
  }
}

std::string choose_across_backend(const std::string& where, const std::string& setting,
                                  const ExchangedPlacements& placements) {
  check_hier_across(where, setting);
  std::map<std::string, std::vector<int>> said;  // setting -> the ranks that have it
  for (size_t r = 0; r < placements.hier_across.size(); ++r) {
    if (!placements.hier_across[r].empty()) said[placements.hier_across[r]].push_back(static_cast<int>(r));
  }
  if (said.size() > 1) {
    std::string which;
    for (const auto& [value, ranks] : said) {
      which += (which.empty() ? "" : ", ") + value + " on ranks " + rank_list_text(ranks);
    }
    throw InvalidArgument(where + ": the ranks disagree on backend setting 'hier_across' (DISTCOMM_HIER_ACROSS): " +
                          which + "; give every rank the same");
  }
  if (setting == "gloo") return "gloo";
  for (size_t r = 0; r < placements.runs_mpi.size(); ++r) {
    if (placements.runs_mpi[r]) continue;
    if (setting == "auto") return "gloo";
    throw InvalidArgument(where + ": hier_across = 'mpi', but rank " + std::to_string(r) +
                          " cannot run mpi across hosts here: only the world group of a job mpirun started can, on ranks "
                          "whose mpi plugin loads (set hier_across to gloo or auto, or start every rank with mpirun)");
  }
  return placements.runs_mpi.empty() ? "gloo" : "mpi";
}

}  // namespace distcomm
