// The settings the gloo backend reads from BackendOptions::config, as its plugin declares
// them. No gloo here, so that the plugin built without libgloo declares the same keys.
#pragma once

#include "api/plugin.h"

namespace distcomm {
namespace gloo {

// Ended by an entry whose name is nullptr (distcomm_plugin_v1::config_keys). Parsed where
// they are used: gloo_device.h (ifname, hostname, and the core's master_addr),
// gloo_all_reduce.h (algorithm), gloo_worker.h (worker_sched).
extern const distcomm_config_key kConfigKeys[];

}  // namespace gloo
}  // namespace distcomm
