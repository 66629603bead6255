// "gloo" or "cpu:gloo,cuda:nccl": which backend serves which device type of a group, parsed
// once when the group (or init_process_group) is given it. "auto" (alone, or for cpu)
// chooses shm, gloo or the hierarchy of both per group by where its ranks run, and "hier"
// asks for that hierarchy (auto_backend.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "api/device.h"
#include "api/group/process_environment.h"

namespace distcomm {

// The backend names that are no plugin's: auto_backend.h chooses plugins for them per group.
inline const std::vector<std::string>& built_in_backend_names() {
  static const std::vector<std::string> names = {"auto", "hier"};
  return names;
}

struct BackendSpec {
  std::map<DeviceType, std::string> by_device;  // empty for one name: every device its plugin serves
  std::string text;  // as given but in lower case, for messages ("auto (cpu: shm)" once auto has chosen)

  // Names are taken in any case, as torch.distributed takes them ("GLOO", "Cpu:Gloo"):
  // plugins' files and the built-in names are lower case. Throws InvalidArgument naming
  // what is wrong with `spec`.
  static BackendSpec parse(const std::string& spec);
  // The plugins it names, each once ("auto", "hier": their candidates, found through `plugins`).
  std::vector<std::string> names(const PluginSearch& plugins) const;
  // The plugins whose settings a group of this spec takes, given its settings so far: its
  // names, and mpi where "auto" or "hier" may go over mpi across hosts (hier_across auto or
  // mpi, in a process mpirun started: launcher = mpirun) and the mpi plugin loads, so that
  // mpi's own settings (agreement_check, progress, ...) reach it there too.
  std::vector<std::string> names_taking_settings(const PluginSearch& plugins,
                                                 const std::map<std::string, std::string>& config) const;
  // Which device type each plugin serves ("auto" and "hier" left as they are): a single name serves every
  // device type its plugin declares.
  std::map<DeviceType, std::string> plan(const PluginSearch& plugins) const;
  // Whether a group of this spec needs a store shared by its ranks: false when every
  // backend in it finds its peers by itself (DISTCOMM_PLUGIN_SELF_RENDEZVOUS).
  bool needs_store(const PluginSearch& plugins) const;
};

}  // namespace distcomm
