#include "api/plugin/plugin_registry.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <cerrno>
#include <exception>
#include <map>
#include <mutex>
#include <set>

#include "api/diagnostics/op_fingerprint.h"
#include "api/errors.h"
#include "api/group/backend_spec.h"
#include "api/logging.h"
#include "api/plugin/elf_extent.h"
#include "api/process/local_processes.h"

namespace distcomm {
namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Why `path` is not a file the loader can open, as the search list says it: "not found" only
// where nothing of that name is there; a folder it may not search (another user's install,
// mode 700) or a directory of the plugin's name must not read as a missing plugin.
std::string why_no_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? "a directory, not a file" : "not a regular file";
  if (errno == EACCES) return "cannot be looked at: " + std::string(std::strerror(errno)) + " (a folder on the way may not be searched by this user)";
  if (errno == ENOENT) return "not found";
  return std::string(std::strerror(errno));
}

std::string dirname_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// The folder libdistcomm.so was loaded from (dladdr on one of our own symbols).
std::string core_library_dir() {
  Dl_info info;
  if (::dladdr(reinterpret_cast<void*>(&core_config_keys), &info) && info.dli_fname) {
    char real[PATH_MAX];
    if (::realpath(info.dli_fname, real)) return dirname_of(real);
    return dirname_of(info.dli_fname);
  }
  return "";
}

// Bazel runfiles: $RUNFILES_DIR, $TEST_SRCDIR, or <binary>.runfiles next to the binary.
// Plugins sit at <runfiles>/distcomm/backends/<name>/.
std::vector<std::string> runfiles_plugin_dirs(const PluginSearch& search) {
  std::vector<std::string> roots = search.runfiles_roots;
  const std::string exe = self_exe();
  if (!exe.empty()) roots.push_back(exe + ".runfiles");
  std::vector<std::string> dirs;
  std::set<std::string> seen;
  for (const auto& root : roots) {
    const std::string backends = root + "/distcomm/backends";
    if (!is_dir(backends) || !seen.insert(backends).second) continue;
    if (DIR* d = ::opendir(backends.c_str())) {
      while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != ".." && is_dir(backends + "/" + n)) dirs.push_back(backends + "/" + n);
      }
      ::closedir(d);
    }
  }
  return dirs;
}

std::string file_name_for(const std::string& name) { return "libdistcomm_" + name + ".so"; }

// The plugin this thread is dlopening, for the terminate handler below.
thread_local const std::pair<std::string, std::string>* t_loading = nullptr;  // name, path
std::terminate_handler g_previous_terminate = nullptr;

// An exception out of a plugin's static initialisation (run by dlopen, on the loading
// thread) cannot be caught: C++ calls std::terminate, whose handler (run_main's) names the
// exception but no file. This one says which plugin first, then hands over.
[[noreturn]] void on_terminate_while_loading() {
  if (t_loading && std::current_exception()) {
    log_line("backend '" + t_loading->first + "' (" + t_loading->second +
             "): the plugin's static initialisation (run by dlopen) threw " + local::describe_current_exception() +
             "; the process ends (C++ allows no catching it): fix or remove the plugin");
  }
  if (g_previous_terminate) g_previous_terminate();
  std::abort();
}

// While it lives, this thread is loading plugin `name` from `path`. The handler is
// installed once, chained to the one in place (run_main's, set when the program starts).
class LoadingPlugin {
 public:
  LoadingPlugin(const std::string& name, const std::string& path) : what_(name, path) {
    static std::once_flag installed;
    std::call_once(installed, [] { g_previous_terminate = std::set_terminate(on_terminate_while_loading); });
    t_loading = &what_;
  }
  ~LoadingPlugin() { t_loading = nullptr; }
  LoadingPlugin(const LoadingPlugin&) = delete;
  LoadingPlugin& operator=(const LoadingPlugin&) = delete;

 private:
  const std::pair<std::string, std::string> what_;
};

// Plugins do not link the core (writing-a-plugin.md): the dynamic linker resolves their
// imports of it in the global scope, where the core is only when the program linked it or
// opened it RTLD_GLOBAL. A library that links the core and is opened with RTLD_LOCAL
// (dlopen's default, Python's ctypes.CDLL) brings the core in locally, and every plugin
// then fails on an undefined symbol ("_ZTIN8distcomm4WorkE"). Reopening the core with
// RTLD_NOLOAD | RTLD_GLOBAL promotes the copy already loaded (glibc's dlopen(3)); the
// handle is kept, as the plugins are.
void make_core_global() {
  static std::once_flag once;
  std::call_once(once, [] {
    Dl_info core{};
    if (::dladdr(reinterpret_cast<void*>(&make_core_global), &core) == 0 || !core.dli_fname) return;
    ::dlopen(core.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  });
}

// Loads one candidate file and checks its descriptor; on refusal returns nullptr and why.
const distcomm_plugin_v1* try_load(const std::string& path, const std::string& name, std::string* why) {
  // RTLD_LOCAL for the plugin: plugins only import from the core, never export to others.
  make_core_global();
  // dlopen of a file cut short would end the process with SIGBUS, not fail.
  if (std::string cut = internal::elf_cut_short(path); !cut.empty()) {
    *why = cut;
    return nullptr;
  }
  void* handle = nullptr;
  {
    const LoadingPlugin loading(name, path);
    handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!handle) {
    *why = std::string("dlopen failed: ") + ::dlerror();
    return nullptr;
  }
  auto entry = reinterpret_cast<distcomm_plugin_entry_v1>(::dlsym(handle, DISTCOMM_PLUGIN_ENTRY));
  if (!entry) {
    *why = "no entry point " DISTCOMM_PLUGIN_ENTRY " (not a distcomm plugin, or built for another "
           "plugin interface version)";
    ::dlclose(handle);
    return nullptr;
  }
  const distcomm_plugin_v1* d = entry();
  // The handle stays open from here on: the descriptor lives in the plugin's memory.
  if (!d || d->struct_size < DISTCOMM_PLUGIN_V1_0_SIZE) {
    *why = "descriptor is missing or too small";
    return nullptr;
  }
  if (d->abi_major != DISTCOMM_PLUGIN_ABI_MAJOR) {
    *why = "plugin ABI major " + std::to_string(d->abi_major) + " differs from the core's " +
           std::to_string(DISTCOMM_PLUGIN_ABI_MAJOR) + ": rebuild the plugin against this distcomm";
    return nullptr;
  }
  const std::string tool = d->toolchain ? d->toolchain : "";
  if (tool != DISTCOMM_TOOLCHAIN_TAG) {
    *why = "plugin toolchain '" + tool + "' differs from the core's '" DISTCOMM_TOOLCHAIN_TAG
           "': C++ objects cannot cross between them; rebuild the plugin with the same compiler "
           "and standard library";
    return nullptr;
  }
  if (!d->name || name != d->name) {
    *why = std::string("file is named for '") + name + "' but the plugin calls itself '" +
           (d->name ? d->name : "") + "'";
    return nullptr;
  }
  if (!d->available || !d->create) {
    *why = "descriptor has no available() or create()";
    return nullptr;
  }
  return d;
}

PluginInfo describe(const distcomm_plugin_v1* d, const std::string& path) {
  PluginInfo info;
  info.name = d->name;
  info.path = path;
  info.version = d->version ? d->version : "";
  info.abi_minor = d->abi_minor;
  info.devices = d->devices;
  info.flags = d->flags;
  info.descriptor = d;
  // The ABI 1.1 field, where the plugin's descriptor has it.
  if (d->struct_size >= DISTCOMM_PLUGIN_V1_0_SIZE + sizeof(d->config_keys) && d->config_keys) {
    info.declares_config = true;
    for (const distcomm_config_key* k = d->config_keys; k->name; ++k) {
      info.config_keys.push_back(
          {k->name, k->default_value ? k->default_value : "", k->env ? k->env : "", k->help ? k->help : ""});
    }
  }
  try {
    info.available = d->available(&info.unavailable_reason) != 0;
  } catch (...) {
    info.available = false;
    info.unavailable_reason = "available() threw " + local::describe_current_exception();
  }
  return info;
}

std::atomic<DebugLevel> g_debug{DebugLevel::kOff};

// "the built-in" plugin of `name` that the one found in DISTCOMM_PLUGIN_PATH's `dir` hides:
// the first file of that name later in the search path ("" when none). Without the line
// load_plugin logs, a stale libdistcomm_gloo.so in that folder would replace the built-in
// gloo silently.
std::string built_in_hidden_by(const std::string& dir, const std::string& file, const PluginSearch& search) {
  const auto& own = search.plugin_path;
  if (std::find(own.begin(), own.end(), dir) == own.end()) return "";
  for (const auto& later : plugin_search_path(search)) {
    if (std::find(own.begin(), own.end(), later) != own.end()) continue;
    if (is_file(later + "/" + file)) return later + "/" + file;
  }
  return "";
}

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}

std::map<std::string, PluginInfo>& loaded() {
  static auto* m = new std::map<std::string, PluginInfo>();  // never destroyed: plugins stay loaded
  return *m;
}

// distcomm's own libraries that share the plugins' prefix without being plugins: every
// libdistcomm_<name>.so that //:install puts in <prefix>/lib (tools/install/install.sh),
// the folder of libdistcomm.so, which is searched for plugins. Without this list they
// showed as backends, and asking for one dlopened it ("no entry point"; libdistcomm_torch
// pulls in libtorch and runs its static initialisers). Checking each file's entry point
// instead would dlopen every file in the search path (running its initializers) to write
// one error message. docs/writing-a-plugin.md names the same (non_plugin_library_names()).
struct NonPlugin {
  const char* name;
  const char* what;
};
constexpr NonPlugin kNonPlugins[] = {
    {"ft", "distcomm's fault-tolerance library (ft/)"},
    {"ddp", "distcomm's DistributedDataParallel library (ddp/)"},
    {"torch", "distcomm's libtorch integration (integrations/torch/)"},
};

const char* non_plugin_library(const std::string& name) {
  for (const NonPlugin& n : kNonPlugins) {
    if (name == n.name) return n.what;
  }
  return nullptr;
}

bool is_lower_case(const std::string& s) {
  return std::none_of(s.begin(), s.end(), [](unsigned char c) { return std::isupper(c); });
}

// A file in `dir` whose name is `file` but for case ("" when none): backend specs are lower
// case (backend_spec.h), so libdistcomm_Upper.so is never the file asked for, and "not
// found" alone would leave its owner puzzled.
std::string case_variant(const std::string& dir, const std::string& file) {
  std::string found;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != file && n.size() == file.size() &&
          std::equal(n.begin(), n.end(), file.begin(), [](unsigned char a, unsigned char b) {
            return std::tolower(a) == std::tolower(b);
          })) {
        found = n;
        break;
      }
    }
    ::closedir(d);
  }
  return found;
}

// Names of plugin files in the search path (for "available backends: ..."), less distcomm's
// libraries that are not plugins.
std::vector<std::pair<std::string, std::string>> scan_names(const PluginSearch& search) {
  std::vector<std::pair<std::string, std::string>> found;
  std::set<std::string> seen;
  const std::string prefix = "libdistcomm_", suffix = ".so";
  for (const auto& dir : plugin_search_path(search)) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) continue;
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > prefix.size() + suffix.size() && n.compare(0, prefix.size(), prefix) == 0 &&
          n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
        const std::string name = n.substr(prefix.size(), n.size() - prefix.size() - suffix.size());
        if (non_plugin_library(name) || !invalid_backend_name_reason(name).empty()) continue;
        if (seen.insert(name).second) found.emplace_back(name, dir + "/" + n);
      }
    }
    ::closedir(d);
  }
  return found;
}

}  // namespace

std::string invalid_backend_name_reason(const std::string& name) {
  if (name.empty()) return "a backend name is not empty";
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '_') continue;
    char shown[16];
    if (std::isprint(u)) {
      std::snprintf(shown, sizeof(shown), "'%c'", c);
    } else {
      std::snprintf(shown, sizeof(shown), "byte 0x%02x", u);
    }
    return std::string(shown) + " is not allowed: a backend name is letters, digits and '_' (its plugin is "
           "libdistcomm_<name>.so, looked up by that name in the plugin search path's folders, never in "
           "another folder)";
  }
  return "";
}

// A plugin's exception out of create(), said with the rank, group and backend it belongs
// to (a plugin's own words, "TCPStore ...: timed out after 8 s waiting for key ...", named
// neither): "rank 0/2 group 'world': while creating backend 'mine': <its message>". A
// distcomm error keeps its type (the group's creation and the fault handling catch it by
// type); an InvalidArgument (a setting's value the plugin refused) reads "rank 0/2 group
// 'world' (mine): ..." as every other refusal of a setting does. A message that already
// begins with a rank ("rank 0/2 group 'world' (gloo): init timed out ...": InitWait's own,
// where the backend gave it the group's words) is left as it is. Any other exception
// ("boom in ctor", or "unknown exception" for one that is not a std::exception) becomes an
// Error naming also the plugin's file and the exception's type.
std::exception_ptr backend_creation_error(std::exception_ptr e, const std::string& name,
                                          const BackendOptions& options, const std::string& path,
                                          const std::string& call) {
  const std::string rank = group_rank_text(options.rank, options.size, options.group_name, options.global_ranks);
  const std::string creating = rank + ": while creating backend '" + name + "'";
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    const std::string what = x.what();
    if (what.rfind("rank ", 0) == 0 || what.find(creating) != std::string::npos) return e;
    if (dynamic_cast<const InvalidArgument*>(&x)) return with_context(e, rank + " (" + name + ")");
    return with_context(e, creating);
  } catch (...) {
    return std::make_exception_ptr(Error(creating + " (" + path + "): " + call + " threw " +
                                         local::describe_current_exception()));
  }
}

std::vector<std::string> non_plugin_library_names() {
  std::vector<std::string> out;
  for (const NonPlugin& n : kNonPlugins) out.push_back(n.name);
  return out;
}

std::string plugin_being_loaded() { return t_loading ? t_loading->second : std::string(); }

std::vector<std::string> plugin_search_path(const PluginSearch& search) {
  std::vector<std::string> dirs = search.plugin_path;
  const std::string exe = self_exe();
  if (!exe.empty()) dirs.push_back(dirname_of(exe));
  for (auto& d : runfiles_plugin_dirs(search)) dirs.push_back(d);
  const std::string core = core_library_dir();
  if (!core.empty()) {
    dirs.push_back(core);
    dirs.push_back(core + "/distcomm/plugins");
  }
  // Drop repeats, keep order.
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (auto& d : dirs) {
    if (seen.insert(d).second) unique.push_back(d);
  }
  return unique;
}

std::vector<std::string> plugin_search_path() { return plugin_search_path(PluginSearch::from_environment()); }

const PluginInfo& load_plugin(const std::string& name, const PluginSearch& search) {
  // Before any file is looked up: the name becomes part of a path ("a/b" would search
  // sub-folders, "../x" other folders, and dlopen runs a file's initialisers before its
  // descriptor's name could refuse it).
  const std::string invalid = invalid_backend_name_reason(name);
  if (!invalid.empty()) throw InvalidArgument("invalid backend name '" + name + "': " + invalid);
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = loaded().find(name);
  if (it != loaded().end()) return it->second;

  std::string tried;
  // Files of this name refused before one loads: said, since a refused file earlier in the
  // search path (a plugin built for another ABI in DISTCOMM_PLUGIN_PATH) is most often a
  // mistake, and the one loaded instead would otherwise hide it.
  std::string refused;
  for (const auto& dir : plugin_search_path(search)) {
    const std::string path = dir + "/" + file_name_for(name);
    if (!is_file(path)) {
      const std::string other = case_variant(dir, file_name_for(name));
      tried += "\n  " + path + ": " + why_no_file(path) +
               (other.empty() ? "" : " (" + other + " is there, but backend names are lower case: rename it " +
                                         file_name_for(name) + ")");
      continue;
    }
    if (const char* what = non_plugin_library(name)) {
      tried += "\n  " + path + ": " + what + ", not a backend plugin";
      continue;
    }
    std::string why;
    if (const distcomm_plugin_v1* d = try_load(path, name, &why)) {
      const std::string hidden = built_in_hidden_by(dir, file_name_for(name), search);
      if (!hidden.empty() && g_debug.load() != DebugLevel::kOff) {
        log_line("backend '" + name + "': using " + path + " (from DISTCOMM_PLUGIN_PATH) in place of the built-in " +
                 hidden);
      }
      if (!refused.empty()) {
        log_line("warning: backend '" + name + "': loaded " + path + "; skipped, earlier in the plugin search path:" +
                 refused);
      }
      return loaded().emplace(name, describe(d, path)).first->second;
    }
    tried += "\n  " + path + ": refused: " + why;
    refused += "\n  " + path + " (refused: " + why + ")";
  }
  // What a backend spec may name: the built-in names, which choose among the plugins, and
  // the plugins found.
  std::string names;
  for (const std::string& n : built_in_backend_names()) names += n + ", ";
  std::string plugins;
  // A file named in another case is left out: no backend spec can name it (the line above
  // for its folder says so).
  for (const auto& [n, path] : scan_names(search)) {
    // This backend's own files are there, and were refused (above): it is no backend to choose.
    if (is_lower_case(n)) plugins += (plugins.empty() ? "" : ", ") + n + (n == name ? " (refused: see above)" : "");
  }
  throw BackendUnavailable("cannot load backend '" + name + "': no usable " + file_name_for(name) +
                           ". Searched:" + tried + "\nAvailable backends: " + names +
                           (plugins.empty() ? "no plugin found" : plugins) +
                           ". Set DISTCOMM_PLUGIN_PATH to the folder that holds the plugin.");
}

const PluginInfo& load_plugin(const std::string& name) { return load_plugin(name, PluginSearch::from_environment()); }

std::vector<PluginInfo> list_backends() {
  const PluginSearch search = PluginSearch::from_environment();
  std::vector<PluginInfo> out;
  for (const auto& [name, path] : scan_names(search)) {
    try {
      out.push_back(load_plugin(name, search));
    } catch (const BackendUnavailable& e) {
      PluginInfo info;
      info.name = name;
      info.path = path;
      info.unavailable_reason = e.what();
      out.push_back(info);
    }
  }
  return out;
}

const std::vector<ConfigKey>& core_config_keys() {
  static const std::vector<ConfigKey> keys = {
      {"master_addr", "", "", "set by init: the host of the rendezvous store (env:// or tcp://)"},
      {"local_rank", "", "", "set by init from the launcher: this rank's index on its host"},
      {"local_world_size", "", "", "set by init from the launcher: how many ranks run on this host"},
      {"launcher", "", "",
       "set by init: what started the process (torchrun, mpirun, slurm, pmi, pmix), empty when none did"},
      {"hier_across", "gloo", "DISTCOMM_HIER_ACROSS",
       "the backend a hierarchical group (hier, or auto across hosts) uses across hosts and for the ops it runs "
       "flat: gloo, mpi, or auto (mpi for the world group of a job mpirun started where every rank can run the mpi "
       "plugin, else gloo); the same on every rank"},
  };
  return keys;
}

void check_backend_config(const std::vector<std::string>& backends, const std::map<std::string, std::string>& config,
                          const PluginSearch& search) {
  std::set<std::string> known;
  for (const ConfigKey& k : core_config_keys()) known.insert(k.name);
  std::string theirs;
  for (const std::string& name : backends) {
    const PluginInfo& info = load_plugin(name, search);
    if (!info.declares_config) return;
    std::string keys;
    for (const ConfigKey& k : info.config_keys) {
      known.insert(k.name);
      keys += (keys.empty() ? "" : ", ") + k.name;
    }
    theirs += (theirs.empty() ? "" : "; ") + name + ": " + (keys.empty() ? "none" : keys);
  }
  for (const auto& [key, value] : config) {
    if (known.count(key)) continue;
    std::string core;
    for (const ConfigKey& k : core_config_keys()) core += (core.empty() ? "" : ", ") + k.name;
    throw InvalidArgument("backend config key '" + key + "' (= '" + value + "') is not a setting of " +
                          (backends.size() == 1 ? "backend " + backends[0] : "any backend of the group") +
                          ". Known keys: " + theirs + "; the core's (every backend's): " + core);
  }
}

std::unique_ptr<Backend> create_backend(const std::string& name, const BackendOptions& options,
                                        const PluginSearch& search) {
  const PluginInfo& info = load_plugin(name, search);
  if (!info.available) {
    throw BackendUnavailable("backend '" + name + "' (" + info.path + ") cannot run here: " +
                             (info.unavailable_reason.empty() ? std::string("(the plugin gave no reason)")
                                                              : info.unavailable_reason));
  }
  const uint32_t bit = options.device == DeviceType::kCPU ? DISTCOMM_DEVICE_CPU : DISTCOMM_DEVICE_CUDA;
  if (!(info.devices & bit)) {
    throw BackendUnavailable("backend '" + name + "' does not serve " +
                             device_type_name(options.device) + " tensors");
  }
  std::unique_ptr<Backend> backend;
  try {
    backend.reset(info.descriptor->create(options));
  } catch (...) {
    std::rethrow_exception(backend_creation_error(std::current_exception(), name, options, info.path));
  }
  if (!backend) throw BackendUnavailable("backend '" + name + "' (" + info.path + ") create() returned null");
  // The core asks a new backend its name and its ops right away (the group's op table, every
  // error's words): an exception there is said as one of create() is, naming the plugin,
  // rather than reaching the program bare ("supported_ops exploded"); and a backend that
  // calls itself otherwise than its plugin would have its errors name a backend that is not
  // there, or none ("backend '' threw").
  const auto asked = [&](const std::string& call, const auto& ask) {
    try {
      return ask();
    } catch (...) {
      std::rethrow_exception(backend_creation_error(std::current_exception(), name, options, info.path, call));
    }
  };
  const std::string called = asked("name()", [&] { return backend->name(); });
  if (called != name) {
    // Said, not refused: plugins built before the rule was written down keep loading.
    static std::mutex said_mu;
    static std::set<std::string> said;
    std::lock_guard<std::mutex> lock(said_mu);
    if (said.insert(name).second) {
      log_line("warning: backend '" + name + "' (" + info.path + "): its Backend::name() says '" + called +
               "', not its plugin's name: its errors will name '" + called + "'; return '" + name +
               "' from name()");
    }
  }
  asked("supported_ops()", [&] { return backend->supported_ops(); });
  return backend;
}

std::unique_ptr<Backend> create_backend(const std::string& name, const BackendOptions& options) {
  return create_backend(name, options, PluginSearch::from_environment());
}

}  // namespace distcomm

namespace distcomm {
void set_plugin_debug_level(DebugLevel level) { g_debug.store(level); }
}  // namespace distcomm

extern "C" uint32_t distcomm_core_abi_minor() { return DISTCOMM_PLUGIN_ABI_MINOR; }
