// The core entry points a plugin may call only where the core has them (added after ABI 1.0,
// see api/plugin/plugin.h) must be weak references in every plugin: the loader opens plugins
// with RTLD_NOW, so a plugin holding a strong reference to one would not load at all in a
// core that predates it (found by a review: GroupFailure::set_world_ranks, a plain member
// function, made every rebuilt plugin unloadable in a 1.6 core). Read with `nm -D`.
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testing/test_files.h"

namespace distcomm {
namespace {

// Every core function a plugin may call that came after 1.0, with the minor that added it.
const std::map<std::string, int> kLaterCoreEntryPoints = {
    {"distcomm_core_abi_minor", 3},
    {"distcomm_current_cuda_stream", 5},
    {"distcomm_group_failure_set_world_ranks", 7},
    {"distcomm_resolve", 8},
    {"distcomm_work_forked_since_issue", 9},
    {"distcomm_refusal_draining", 10},  // api/diagnostics/refused_transfers.h: shm marks a refused recv
    {"distcomm_work_wait_note", 11},    // api/diagnostics/work_wait_note.h: shm names held messages
    {"distcomm_group_failure_launcher_stops", 11},  // group_failure.h: gloo and shm name ranks their launcher stopped
};

// "<type letter> <name>" for each undefined dynamic symbol of `so` (nm -D --undefined-only).
std::map<std::string, char> undefined_symbols(const std::string& so) {
  std::map<std::string, char> symbols;
  FILE* nm = ::popen(("nm -D --undefined-only '" + so + "' 2>&1").c_str(), "r");
  if (nm == nullptr) return symbols;
  char line[4096];
  while (std::fgets(line, sizeof line, nm)) {
    std::istringstream fields(line);
    std::string type, name;
    if (fields >> type >> name && type.size() == 1) symbols[name] = type[0];
  }
  EXPECT_EQ(::pclose(nm), 0) << "nm -D --undefined-only " << so << " failed (binutils' nm is needed)";
  return symbols;
}

TEST(WeakCoreSymbols, EveryPluginHoldsTheLaterCoreEntryPointsWeak) {
  int referenced = 0;
  for (const std::string plugin : {"gloo", "mpi", "nccl", "shm"}) {
    const std::string so = testing::runfile("backends/" + plugin + "/libdistcomm_" + plugin + ".so");
    const std::map<std::string, char> symbols = undefined_symbols(so);
    ASSERT_FALSE(symbols.empty()) << so << ": no undefined symbols read";
    for (const auto& [name, minor] : kLaterCoreEntryPoints) {
      const auto it = symbols.find(name);
      if (it == symbols.end()) continue;
      ++referenced;
      EXPECT_EQ(it->second, 'w') << plugin << " refers to " << name << " (ABI 1." << minor
                                 << ") strongly: it would not load in an older core";
    }
  }
  // The check looks at something: gloo, mpi, nccl and shm name the world ranks of their
  // groups, gloo looks its addresses up by a deadline, and each one's wait() asks whether
  // it runs in a forked child; gloo asks which lost peers their launcher stopped.
  EXPECT_GE(referenced, 11);
}

}  // namespace
}  // namespace distcomm
