#include "tools/launch/torchrun_flags.h"

#include <dirent.h>
#include <sched.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace distcomm {
namespace launch {
namespace {

// CUDA devices as the driver shows them (/dev/nvidia0, /dev/nvidia1, ...): the launcher
// links no CUDA, and asking the runtime here would start a context in the launcher.
int gpus_here() {
  int n = 0;
  if (DIR* dev = ::opendir("/dev")) {
    while (const dirent* e = ::readdir(dev)) {
      const std::string name = e->d_name;
      if (name.size() > 6 && name.compare(0, 6, "nvidia") == 0 &&
          name.find_first_not_of("0123456789", 6) == std::string::npos) {
        ++n;
      }
    }
    ::closedir(dev);
  }
  return n;
}

// The cores this process may run on (its affinity: a container's or a job's cgroup share
// often less than the machine has).
int cores_here() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace

int parse_nproc_per_node(const std::string& text) {
  if (text == "cpu") return cores_here();
  if (text == "gpu" || text == "auto") {
    const int gpus = gpus_here();
    if (gpus > 0) return gpus;
    if (text == "auto") return cores_here();
    throw std::invalid_argument("--nproc_per_node=gpu: no CUDA device on this machine (no /dev/nvidia<N>)");
  }
  char* end = nullptr;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') {
    throw std::invalid_argument("--nproc_per_node=" + text + ": expected a number of ranks, or cpu, gpu or auto");
  }
  if (n < 1 || n > 100000) throw std::invalid_argument("--nproc_per_node=" + text + ": must be at least 1 (and sane)");
  return static_cast<int>(n);
}

void check_rdzv_backend(const std::string& backend, const std::string& endpoint, bool standalone) {
  if (backend.empty()) return;
  if (backend == "static") {
    if (!endpoint.empty()) {
      throw std::invalid_argument("--rdzv_backend=static meets at --master_addr/--master_port; --rdzv_endpoint=" +
                                  endpoint + " is for --rdzv_backend=c10d");
    }
    return;
  }
  if (backend == "c10d") {
    if (endpoint.empty() && !standalone) {
      throw std::invalid_argument("--rdzv_backend=c10d: give every launcher the same --rdzv_endpoint=HOST:PORT");
    }
    return;
  }
  throw std::invalid_argument("--rdzv_backend=" + backend +
                              ": the launchers meet through their own store: use c10d (with --rdzv_endpoint) or static");
}

long long seconds_flag(const std::string& name, double seconds, bool minus_one_is_off) {
  if (minus_one_is_off && seconds == -1) return -1000;
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e9) {
    char typed[64];
    std::snprintf(typed, sizeof(typed), "%g", seconds);
    throw std::invalid_argument("--" + name + "=" + typed + ": expected a number of seconds in [0, 1e9]" +
                                (minus_one_is_off ? ", or -1 (off)" : ""));
  }
  return static_cast<long long>(seconds * 1000);
}

std::string tee_hint(const std::string& typed) {
  return "torchrun's " + typed + " N (0 none, 1 stdout, 2 stderr, 3 both; or per rank, 0:1,1:2) copies the ranks' "
         "output from its log files to the terminal: here --log_dir=DIR writes every rank's stdout and stderr to "
         "DIR/rank_<R>.log and --tee (a switch, no value) shows them on the terminal as well; --ranks_filter=0,2 "
         "picks whose";
}

bool looks_like_torchrun_tee_value(const std::string& value) {
  if (value.empty()) return false;
  if (value.size() == 1 && value[0] >= '0' && value[0] <= '3') return true;
  // "0:1,1:2": a stream per local rank.
  bool colon = false;
  for (char c : value) {
    if (c == ':') colon = true;
    else if (c != ',' && !std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return colon;
}

std::string torchrun_only_flag_hint(const std::string& typed) {
  const std::string name = typed;
  std::string n = typed.substr(typed.find_first_not_of('-'));
  for (char& c : n) c = c == '-' ? '_' : c;
  if (n == "m" || n == "module" || n == "run_path") {
    return "torchrun's " + name + " runs a Python module or file; the launcher runs a program: launch [flags] -- "
           "python3 -m module ... (or the program itself)";
  }
  if (n == "r" || n == "redirects") {
    return "torchrun's " + name + " sends the ranks' output to files: here --log_dir=DIR (one file per rank), with "
           "--tee to show it on the terminal as well";
  }
  if (n == "t" || n == "tee") return tee_hint(name);
  if (n == "local_ranks_filter") return "torchrun's --local_ranks_filter is --ranks_filter here (global ranks)";
  if (n == "rdzv_conf") {
    return "torchrun's --rdzv_conf tunes its rendezvous: here --rdzv_timeout_s and --rdzv_last_call_s";
  }
  return "";
}

std::string pet_variable(const std::string& flag) {
  std::string v = "PET_";
  for (char c : flag) v += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return v;
}

std::string name_pet_variables(std::string message, const std::vector<std::string>& from_pet) {
  for (const std::string& flag : from_pet) {
    const std::string typed = "--" + flag;
    const std::string variable = pet_variable(flag);
    for (size_t at = message.find(typed); at != std::string::npos; at = message.find(typed, at)) {
      // The whole name only: --nnodes is not the start of --nnodes_max.
      const size_t end = at + typed.size();
      const unsigned char next = end < message.size() ? message[end] : ' ';
      if (std::isalnum(next) || next == '_') {
        at = end;
        continue;
      }
      message.replace(at, typed.size(), variable);
      at += variable.size();
    }
  }
  return message;
}

}  // namespace launch
}  // namespace distcomm
