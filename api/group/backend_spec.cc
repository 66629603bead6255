#include "api/group/backend_spec.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <set>
#include <sstream>

#include "api/errors.h"
#include "api/group/auto_backend.h"
#include "api/logging.h"
#include "api/plugin/plugin_registry.h"

namespace distcomm {
namespace {

// A plugin's name in `spec` (as load_plugin would refuse it, but before anything is sent).
void check_name(const std::string& spec, const std::string& name) {
  const std::vector<std::string>& built_in = built_in_backend_names();
  if (std::find(built_in.begin(), built_in.end(), name) != built_in.end()) return;
  const std::string why = invalid_backend_name_reason(name);
  if (why.empty()) return;
  throw InvalidArgument("invalid backend name '" + name + "': " + why +
                        (spec == name ? std::string() : " (in backend '" + spec + "')"));
}

// "auto" alone adds nccl only where this process sees a GPU (auto_backend_candidates), so
// on a CPU-only node nccl's settings were "not a setting of any backend of the group": one
// program, configured for its GPU nodes, died on its CPU nodes. Where the config holds a key
// that no name so far (nor the core) declares and the nccl plugin does, nccl's settings are
// taken too, and it is said once that they do nothing here, and why. The plugin is loaded
// only then: loading NCCL costs a process a few hundred ms (auto_backend.h).
void add_settings_of_left_out_nccl(std::vector<std::string>& names, const PluginSearch& plugins,
                                   const std::map<std::string, std::string>& config) {
  if (std::find(names.begin(), names.end(), "nccl") != names.end()) return;
  std::set<std::string> known;
  for (const ConfigKey& k : core_config_keys()) known.insert(k.name);
  try {
    for (const std::string& name : names) {
      for (const ConfigKey& k : load_plugin(name, plugins).config_keys) known.insert(k.name);
    }
  } catch (const BackendUnavailable&) {
    return;  // check_backend_config says it, naming the plugin
  }
  if (std::all_of(config.begin(), config.end(), [&](const auto& entry) { return known.count(entry.first) > 0; })) {
    return;  // the usual case: nccl's plugin is not loaded
  }
  std::string nccl_keys;
  try {
    for (const ConfigKey& k : load_plugin("nccl", plugins).config_keys) nccl_keys += " " + k.name + " ";
  } catch (const BackendUnavailable&) {
    return;  // no nccl plugin at all: the keys are nobody's, and refused as such
  }
  std::string nccls;
  for (const auto& [key, value] : config) {
    if (!known.count(key) && nccl_keys.find(" " + key + " ") != std::string::npos) {
      nccls += (nccls.empty() ? "'" : ", '") + key + "'";
    }
  }
  if (nccls.empty()) return;
  names.push_back("nccl");
  static std::once_flag said;
  std::call_once(said, [&] {
    log_line("warning: backend 'auto': setting " + nccls + " is nccl's, and auto sends no cuda tensors to nccl here (" +
             why_nccl_unused(plugins) + "): ignored in this process");
  });
}

}  // namespace

BackendSpec BackendSpec::parse(const std::string& given) {
  BackendSpec out;
  std::string spec = given;
  std::transform(spec.begin(), spec.end(), spec.begin(), [](unsigned char c) { return std::tolower(c); });
  out.text = spec;
  if (spec.empty()) throw InvalidArgument("backend: empty name; expected e.g. 'gloo' or 'cpu:gloo,cuda:nccl'");
  const std::vector<std::string>& built_in = built_in_backend_names();
  if (std::find(built_in.begin(), built_in.end(), spec) != built_in.end()) {
    out.by_device[DeviceType::kCPU] = spec;  // auto_backend.h: decided per group, at creation
    return out;
  }
  if (spec.find(':') == std::string::npos) {
    if (spec.find(',') != std::string::npos) {
      throw InvalidArgument("backend '" + spec + "': a list needs device types, e.g. 'cpu:gloo,cuda:nccl'");
    }
    check_name(spec, spec);
    return out;  // one backend for every device it serves: resolved when the plugin is loaded
  }
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto colon = item.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) {
      throw InvalidArgument("backend '" + spec + "': '" + item + "' is not of the form device:backend");
    }
    const DeviceType dev = parse_device_type(item.substr(0, colon));
    check_name(spec, item.substr(colon + 1));
    if (!out.by_device.emplace(dev, item.substr(colon + 1)).second) {
      throw InvalidArgument("backend '" + spec + "': device '" + item.substr(0, colon) + "' given twice");
    }
  }
  return out;
}

std::vector<std::string> BackendSpec::names(const PluginSearch& plugins) const {
  if (by_device.empty()) return {text};
  std::vector<std::string> out;
  auto add = [&](const std::string& name) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  for (const auto& [device, name] : by_device) {
    if (name != "auto" && name != "hier") add(name);
    else for (const std::string& candidate : auto_backend_candidates(plugins, text == "auto")) add(candidate);
  }
  return out;
}

std::vector<std::string> BackendSpec::names_taking_settings(const PluginSearch& plugins,
                                                          const std::map<std::string, std::string>& config) const {
  std::vector<std::string> out = names(plugins);
  auto value = [&](const char* key) {
    const auto it = config.find(key);
    return it == config.end() ? std::string() : it->second;
  };
  const bool hierarchical = std::any_of(by_device.begin(), by_device.end(),
                                        [](const auto& entry) { return entry.second == "auto" || entry.second == "hier"; });
  const std::string across = value("hier_across");
  if (hierarchical && (across == "auto" || across == "mpi") && value("launcher") == "mpirun" &&
      std::find(out.begin(), out.end(), "mpi") == out.end()) {
    // Only a plugin that loads has settings: without one, auto goes across over gloo (and
    // hier_across=mpi is refused at creation, naming the rank), so init must not fail here.
    try {
      load_plugin("mpi", plugins);
      out.push_back("mpi");
    } catch (const BackendUnavailable&) {
    }
  }
  if (text == "auto") add_settings_of_left_out_nccl(out, plugins, config);
  return out;
}

std::map<DeviceType, std::string> BackendSpec::plan(const PluginSearch& plugins) const {
  std::map<DeviceType, std::string> out = by_device;
  if (out.empty()) {
    const PluginInfo& info = load_plugin(text, plugins);
    if (info.devices & DISTCOMM_DEVICE_CPU) out[DeviceType::kCPU] = text;
    if (info.devices & DISTCOMM_DEVICE_CUDA) out[DeviceType::kCUDA] = text;
  }
  return out;
}

bool BackendSpec::needs_store(const PluginSearch& plugins) const {
  for (const std::string& name : names(plugins)) {
    if (!(load_plugin(name, plugins).flags & DISTCOMM_PLUGIN_SELF_RENDEZVOUS)) return true;
  }
  return false;
}

}  // namespace distcomm
