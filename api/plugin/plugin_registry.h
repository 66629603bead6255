// Finding, checking and loading backend plugins.
//
// Search order for libdistcomm_<name>.so (ARCHITECTURE.md, "The plugin contract"):
//   1. each folder in DISTCOMM_PLUGIN_PATH (colon-separated),
//   2. the folder of the running binary, and its Bazel runfiles (backends/<name>/),
//   3. the folder of libdistcomm.so itself, then its distcomm/plugins/ (where //:install and
//      the Debian package put the plugins: <prefix>/lib/distcomm/plugins).
// A plugin that cannot be used is refused with the reason (not a shared object, no entry
// point, ABI major or toolchain differs: both values are named), and the search goes on.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/debug_level.h"
#include "api/plugin/backend.h"
#include "api/plugin/plugin.h"
#include "api/group/process_environment.h"

namespace distcomm {

// A config key as a plugin declares it (distcomm_config_key).
struct ConfigKey {
  std::string name;
  std::string default_value;  // "" when computed
  std::string env;            // "" when none
  std::string help;
};

struct PluginInfo {
  std::string name;
  std::string path;
  std::string version;
  uint32_t abi_minor = 0;
  uint32_t devices = 0;
  uint32_t flags = 0;
  // The keys the plugin reads; declares_config is false for a plugin that declares none
  // (ABI 1.0, or config_keys null): its keys are unknown.
  bool declares_config = false;
  std::vector<ConfigKey> config_keys;
  bool available = false;
  std::string unavailable_reason;  // when !available
  const distcomm_plugin_v1* descriptor = nullptr;
};

// The core passes `search` down from the edge that read it (process_environment.h). The
// overloads without it read PluginSearch::from_environment() at the call: they are for
// tools and tests, whose call is their own edge.

// The folders searched, in order (existing or not), for messages and tools:
// search.plugin_path, the program's folder, the Bazel runfiles, libdistcomm.so's folder and
// its distcomm/plugins.
std::vector<std::string> plugin_search_path(const PluginSearch& search);
std::vector<std::string> plugin_search_path();

// Loads (once per process) and checks the plugin for `name`. Throws BackendUnavailable
// naming the backend, every path tried, why each was refused and the backends that exist
// (this one marked when its files were refused); InvalidArgument for a name that cannot
// name a plugin (invalid_backend_name_reason), before any file is looked up. A file of the
// name refused before another one loads is logged (a warning: it is most often a mistake,
// a stale or mis-built plugin earlier in DISTCOMM_PLUGIN_PATH), naming both.
const PluginInfo& load_plugin(const std::string& name, const PluginSearch& search);
const PluginInfo& load_plugin(const std::string& name);

// "" when `name` may name a plugin, else why not: a backend name is letters, digits and
// '_' (it becomes the file name libdistcomm_<name>.so; a '/' would reach other folders).
// load_plugin and BackendSpec::parse refuse the others ("invalid backend name '<name>': <why>")
// before any file is looked up.
std::string invalid_backend_name_reason(const std::string& name);

// The <name>s of distcomm's own libdistcomm_<name>.so that are not plugins (ft, ddp,
// torch: installed beside libdistcomm.so, a folder the loader searches). The loader never
// loads, nor lists, them as backends.
std::vector<std::string> non_plugin_library_names();

// The path of the plugin this thread is dlopening now ("" when none): an exception out of
// its static initialisers ends the process inside dlopen, and the terminate handler
// (run_main's) names it.
std::string plugin_being_loaded();

// Every plugin found on the search path, loaded and probed (for tools and messages).
std::vector<PluginInfo> list_backends();

// Keys init_process_group fills in for every backend, from the launcher and the rendezvous
// (master_addr, local_rank, local_world_size, launcher). Every backend may read them.
const std::vector<ConfigKey>& core_config_keys();

// Throws InvalidArgument for a key of `config` that neither the core nor any of the
// `backends` (plugin names) declares, naming the keys they do. A group with a backend that
// declares no keys is not checked.
void check_backend_config(const std::vector<std::string>& backends, const std::map<std::string, std::string>& config,
                          const PluginSearch& search);

// The level DISTCOMM_DEBUG set (init_process_group passes it; OFF until then). At INFO and
// above, load_plugin logs one line when a plugin found in DISTCOMM_PLUGIN_PATH replaces a
// built-in one of the same name (the program's folder, the runfiles, libdistcomm.so's),
// naming both files.
void set_plugin_debug_level(DebugLevel level);

// load_plugin(name), its available() probe, then its factory. An exception create() throws
// comes out with the rank, group and backend ("rank 0/2 group 'world': while creating
// backend 'mine': ..."; an InvalidArgument "rank 0/2 group 'world' (mine): ...") unless its
// message already begins with a rank; a distcomm error keeps its type, any other becomes
// Error naming its type and the plugin's file.
std::unique_ptr<Backend> create_backend(const std::string& name, const BackendOptions& options,
                                        const PluginSearch& search);
std::unique_ptr<Backend> create_backend(const std::string& name, const BackendOptions& options);

// What create_backend throws for `e`, an exception out of backend `name`'s create() (or
// create_subgroup_backend(), which the group's creation calls) with `options`; `path` is
// its plugin's file, named for an exception that is not a distcomm error; `call` is what
// threw it, as that message says ("create()", "name()", "supported_ops()").
std::exception_ptr backend_creation_error(std::exception_ptr e, const std::string& name,
                                          const BackendOptions& options, const std::string& path,
                                          const std::string& call = "create()");

}  // namespace distcomm
