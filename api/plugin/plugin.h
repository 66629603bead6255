// The plugin contract: how a shared object libdistcomm_<name>.so offers a Backend.
//
// A plugin exports one C entry point, DISTCOMM_PLUGIN_ENTRY (versioned in its name), that
// returns a static descriptor. The loader (plugin_registry.h) checks the descriptor's
// struct size, ABI major version and toolchain tag before it calls anything else, because
// Backend is a C++ class: a plugin built by another compiler or standard library ABI
// would crash instead of failing clearly.
//
// Write a plugin with DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG (backends/template/ is a worked
// example):
//
//   static const distcomm_config_key my_keys[] = {
//       {"depth", "4", "DISTCOMM_MINE_DEPTH", "how many messages each rank keeps in flight"},
//       {nullptr, nullptr, nullptr, nullptr}};
//   static int my_available(std::string* why) { return 1; }
//   static distcomm::Backend* my_create(const distcomm::BackendOptions& o) {
//     return new MyBackend(o);
//   }
//   DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG("mine", "mine 1.0", DISTCOMM_DEVICE_CPU, 0, my_available,
//                                      my_create, my_keys)
//
// How the contract grows without breaking plugins already built (the ABI rules):
//   - A new descriptor field goes at the end of distcomm_plugin_v1, with a minor bump; the
//     loader reads it only when the plugin's struct_size covers it (older plugins: the
//     field's "not given" meaning).
//   - A new op: its OpType value is appended to the enum (values are never renumbered), its
//     virtual is appended at the end of Backend (after every existing virtual, so existing
//     vtable slots keep their places) with a default that throws Unsupported, and the minor
//     is bumped. A plugin built before has no such slot, so the core calls an appended
//     virtual only where the plugin has it: an op's only when supported_ops() lists the op
//     (which an older plugin cannot do), any other only when the plugin's ABI minor is at
//     least the one that added it. An op the ProcessGroup builds from others
//     (all_reduce_coalesced) needs no virtual.
//   - A new field of OpContext goes at its end, with a minor bump. The core builds every
//     OpContext and a plugin only reads one through a reference, so an older plugin never
//     sees the field; a newer plugin reads it only where core_abi_minor() (the core's own
//     minor, below) is at least the one that added it (an older core's OpContext ends
//     before it).
//   - Anything else in Backend, BackendOptions, OpContext, Tensor or Work that changes
//     layout or vtable is a major bump: plugins of another major are refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "api/plugin/backend.h"
#include "api/version.h"

// See the ABI rules above. Minor 1: config_keys. Minor 2: Backend::batch_p2p (OpType::kBatchP2P).
// Minor 3: OpContext::fingerprint. Minor 4: Backend::abort and Backend::create_subgroup_backend
// (called only on plugins of minor 4 or later: ProcessGroup::abort calls shutdown() on
// older ones, and their subgroups are created through create() as before). Minor 5:
// Backend::all_reduce_coalesced (kAllReduceCoalesced's value predates it, so the core also
// asks for minor 5 before it calls the virtual). Minor 6: Backend::list_ops and the list
// virtuals (all_gather_list, gather_list, scatter_list, reduce_scatter_list,
// all_to_all_list): the list forms of device tensors go whole to a backend that names them.
// Minor 7: distcomm_group_failure_set_world_ranks (api/diagnostics/group_failure.h), a core
// entry point declared weak, as distcomm_current_cuda_stream: a plugin that calls it still
// loads in an older core (a plain member function would be an undefined symbol there, which
// the loader's RTLD_NOW refuses). No layout changes. Minor 8: distcomm_resolve
// (api/plugin/name_resolution.h), weak as well: a name looked up by a deadline. Minor 9:
// distcomm_work_forked_since_issue (api/work.h), weak as well: a backend's wait() in a child
// forked after the op was issued goes straight to Work::wait (an older core: as before).
// Minor 10: distcomm_refusal_draining (api/diagnostics/refused_transfers.h), weak as well: a
// recv draining the message it refused is no stall (an older core: compared as before). No
// layout changes: OpFingerprint is not only read by plugins but built by them and handed to
// the core in vectors (shm's and mpi's agreement tables, OpFingerprint::decode into the
// plugin's object), so a field appended to it is a major bump, not a minor one; a
// transfer's ordinal epoch is kept by the core beside the op's Work instead (work_marks.h).
// (For a few hours of 2026-12-06 minor 10 meant a 184-byte OpFingerprint, 4357c79; no
// release or package left the repository with it, so minor 10 was redefined, not bumped.)
// Minor 11: distcomm_work_wait_note (api/diagnostics/work_wait_note.h), weak as well: a
// backend's note on a pending op's wait (shm: the messages its rank holds that no receive
// took), which the stall watch's "has waited" lines append (an older core: no note). No
// layout changes: the core keeps the note beside the Work (work_marks.h).
// Also minor 11: distcomm_group_failure_launcher_stops (api/diagnostics/group_failure.h,
// launcher_stops()), weak: which lost peers their launcher stopped after another rank failed
// (gloo and shm name them apart, in the words of launcher_stops.h); an older core: none.
// Core-only although their headers are installed: PendingOp and ProgressReport
// (api/diagnostics/progress_report.h, built by the core's stall watch only); a plugin may
// read the report's text, never build or hold those structs across versions.
// distcomm 0.2.0 (no ABI change): the creation deadline no longer reaches a backend as the
// config keys init_time_left_ms and init_report_ms (and their constants kInitTimeLeftKey,
// kInitReportKey are gone); a backend takes it from InitWait::for_backend, called on the
// thread that runs the plugin's create() or create_subgroup_backend() (init_wait.h,
// BackendCreationScope). Plugins that already called for_backend there are unaffected.
#define DISTCOMM_PLUGIN_ABI_MAJOR 1
#define DISTCOMM_PLUGIN_ABI_MINOR 11

#define DISTCOMM_STR2(x) #x
#define DISTCOMM_STR(x) DISTCOMM_STR2(x)

// Compiler family and major version, C++ standard library and its string ABI: what must
// agree for C++ objects and exceptions to cross between core and plugin.
#if defined(__clang__)
#define DISTCOMM_COMPILER_TAG "clang-" DISTCOMM_STR(__clang_major__)
#elif defined(__GNUC__)
#define DISTCOMM_COMPILER_TAG "gcc-" DISTCOMM_STR(__GNUC__)
#else
#define DISTCOMM_COMPILER_TAG "unknown-compiler"
#endif
#if defined(_GLIBCXX_USE_CXX11_ABI)
#define DISTCOMM_STDLIB_TAG "libstdc++-cxx11abi" DISTCOMM_STR(_GLIBCXX_USE_CXX11_ABI)
#elif defined(_LIBCPP_VERSION)
#define DISTCOMM_STDLIB_TAG "libc++"
#else
#define DISTCOMM_STDLIB_TAG "unknown-stdlib"
#endif
#define DISTCOMM_TOOLCHAIN_TAG DISTCOMM_COMPILER_TAG "/" DISTCOMM_STDLIB_TAG

// Device types a plugin serves (bit mask).
#define DISTCOMM_DEVICE_CPU 1u
#define DISTCOMM_DEVICE_CUDA 2u

// Plugin flags.
// The backend finds its peers by itself (MPI): it needs no store and no MASTER_ADDR, and
// rank and world size come from its launcher (mpirun), which init reads from the
// environment and the backend checks against its own view.
#define DISTCOMM_PLUGIN_SELF_RENDEZVOUS 1u

extern "C" {

// One setting a backend reads from BackendOptions::config.
struct distcomm_config_key {
  const char* name;           // "algorithm"
  const char* default_value;  // as text, or "" when it is computed (the help says how)
  const char* env;            // the variable init_process_group reads it from, or nullptr
  const char* help;           // one line: what it does and which values it takes
};

struct distcomm_plugin_v1 {
  uint32_t struct_size;  // sizeof(distcomm_plugin_v1) as the plugin saw it
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* toolchain;  // DISTCOMM_TOOLCHAIN_TAG as the plugin was compiled
  const char* name;       // "gloo": must match the file name libdistcomm_<name>.so
  const char* version;    // free text, e.g. "gloo 0.5.0 (tcp), distcomm 0.1.0"
  uint32_t devices;       // DISTCOMM_DEVICE_* bits
  uint32_t flags;         // DISTCOMM_PLUGIN_* bits
  // Whether the backend can run on this machine; if not, *why says what is missing
  // ("no CUDA device: cudaGetDeviceCount: CUDA driver version is insufficient...").
  int (*available)(std::string* why);
  // Creates the backend for one group. Runs the group's rendezvous: every rank of the
  // group calls it. May throw distcomm errors; returns an object the core deletes.
  distcomm::Backend* (*create)(const distcomm::BackendOptions& options);
  // ABI 1.1 (read only when struct_size covers it). The keys the backend reads from
  // BackendOptions::config, ended by an entry whose name is nullptr. With them, init
  // refuses a key no backend of the group declares and reads each key's environment
  // variable. nullptr: not declared (a group with such a backend is not checked).
  const distcomm_config_key* config_keys;
};

// The descriptor of an ABI 1.0 plugin ends before config_keys.
#define DISTCOMM_PLUGIN_V1_0_SIZE offsetof(distcomm_plugin_v1, config_keys)

typedef const distcomm_plugin_v1* (*distcomm_plugin_entry_v1)();

}  // extern "C"

#define DISTCOMM_PLUGIN_ENTRY "distcomm_backend_plugin_v1"

// The ABI minor of the core that loaded the plugin. Weak: a core older than minor 3 does
// not define it, and the plugin then sees a null function.
extern "C" uint32_t distcomm_core_abi_minor() __attribute__((weak));

namespace distcomm {
// What a plugin asks before it reads a field appended to OpContext (see the rules above);
// 0 for a core older than minor 3.
inline uint32_t core_abi_minor() { return distcomm_core_abi_minor ? distcomm_core_abi_minor() : 0; }
}  // namespace distcomm

#define DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG(NAME, VERSION, DEVICES, FLAGS, AVAILABLE, CREATE, CONFIG_KEYS) \
  extern "C" __attribute__((visibility("default"))) const distcomm_plugin_v1*                       \
  distcomm_backend_plugin_v1() {                                                                     \
    static const distcomm_plugin_v1 descriptor = {                                                   \
        sizeof(distcomm_plugin_v1), DISTCOMM_PLUGIN_ABI_MAJOR, DISTCOMM_PLUGIN_ABI_MINOR,            \
        DISTCOMM_TOOLCHAIN_TAG,     NAME,                      VERSION,                              \
        DEVICES,                    FLAGS,                     AVAILABLE,                            \
        CREATE,                     CONFIG_KEYS};                                                    \
    return &descriptor;                                                                              \
  }

// A plugin that declares no config keys (its group's config is then not checked).
#define DISTCOMM_DEFINE_PLUGIN(NAME, VERSION, DEVICES, FLAGS, AVAILABLE, CREATE) \
  DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG(NAME, VERSION, DEVICES, FLAGS, AVAILABLE, CREATE, nullptr)

// A plugin that loads but never runs: what a backend builds where its library is missing,
// so that asking for it fails with REASON (a const char* expression: what the build did not
// find) instead of "no such plugin". Its probe says REASON and it creates nothing. It
// declares the real plugin's keys, so a group's settings are checked alike either way.
#define DISTCOMM_DEFINE_UNAVAILABLE_PLUGIN(NAME, VERSION, DEVICES, FLAGS, REASON, CONFIG_KEYS)          \
  namespace {                                                                                          \
  int distcomm_unavailable_probe(std::string* why) {                                                   \
    if (why) *why = (REASON);                                                                          \
    return 0;                                                                                          \
  }                                                                                                    \
  distcomm::Backend* distcomm_unavailable_create(const distcomm::BackendOptions&) { return nullptr; } \
  }                                                                                                    \
  DISTCOMM_DEFINE_PLUGIN_WITH_CONFIG(NAME, VERSION, DEVICES, FLAGS, distcomm_unavailable_probe,        \
                                     distcomm_unavailable_create, CONFIG_KEYS)
