#include "api/init.h"

#include <pthread.h>

#include <mutex>

#include "api/diagnostics/stall_watch.h"
#include "api/group/environment.h"
#include "api/errors.h"
#include "api/store/file_store.h"
#include "api/group/init_method.h"
#include "api/group/init_wait.h"
#include "api/store/internal/socket.h"
#include "api/logging.h"
#include "api/plugin/plugin_registry.h"
#include "api/process/rank_environment.h"
#include "api/store/tcp_store.h"

namespace distcomm {
namespace {

// Held only to read or swap g_default, never while a group is made or torn down: a fork()
// by another thread would otherwise leave it locked for good in the child, and a child's
// destroy_process_group() would wait on it for ever. The fork handlers below take it around
// fork() so that the child never inherits it held.
std::mutex g_mu;
ProcessGroupPtr g_default;

void hold_default_across_fork() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    ::pthread_atfork([] { g_mu.lock(); }, [] { g_mu.unlock(); }, [] { g_mu.unlock(); });
  });
}

// What init gives every backend (core_config_keys()), then each declared key's variable;
// what the program set in backend_config wins.
void fill_config(std::map<std::string, std::string>& config, const BackendSpec& backend, const LaunchEnv& env,
                 const PluginSearch& plugins) {
  auto fill = [&](const std::string& key, const std::string& value) {
    if (!value.empty()) config.emplace(key, value);  // emplace keeps a value already set
  };
  if (env.local_rank >= 0) fill("local_rank", std::to_string(env.local_rank));
  if (env.local_world_size >= 0) fill("local_world_size", std::to_string(env.local_world_size));
  fill("launcher", env.source);
  for (const auto& [key, value] : config_from_environment(core_config_keys())) fill(key, value);
  // After the core's keys: whether mpi's settings apply depends on hier_across and launcher.
  for (const std::string& name : backend.names_taking_settings(plugins, config)) {
    for (const auto& [key, value] : config_from_environment(load_plugin(name, plugins).config_keys)) fill(key, value);
  }
}

// "host:port" -> (host, port); IPv6 as "[::1]:port". `what` names where s came from.
std::pair<std::string, int> split_host_port(const std::string& s, const std::string& what) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos || colon + 1 == s.size()) {
    throw InvalidArgument(what + ": '" + s + "' is not host:port");
  }
  std::string host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  // An empty host would have rank 0's store listen on every interface (the wildcard) and
  // the others connect to this host: the store listens on its host's address only, and
  // every interface only when asked (docs/security.md).
  if (host.empty()) {
    throw InvalidArgument(what + ": '" + s + "' is not host:port: the host is empty (expected the address of rank 0's "
                          "host, which the store listens on and the other ranks connect to; DISTCOMM_STORE_BIND=* "
                          "listens on every interface)");
  }
  return {host, parse_port(what + ": port", s.substr(colon + 1))};
}

// A rank waits for the store's server to listen, saying so every report interval, within
// what is left of init's deadline: connecting alone would wait silently. Rank 0's server,
// for the other ranks; the launcher's, for every rank (it listens before the ranks start,
// but across machines node 0's launcher may start after this one).
void wait_for_store_server(const std::string& host, int port, bool launcher_serves, const InitWait& wait) {
  const std::string where = internal::host_port(host, port);
  std::string last_attempt;  // why the last probe failed: refused, unreachable, a name not answered
  bool said_unknown = false;
  const auto probe = [&](std::chrono::milliseconds slice) {
    bool name_unknown = false;
    try {
      internal::connect_tcp(host, port, slice, "TCPStore", &name_unknown);  // closed at once: a probe
      return true;
    } catch (const StoreError& e) {
      last_attempt = e.what();
      // A name its DNS says does not exist is retried (its record may come once its host is
      // up), but a typo would otherwise be said only at the deadline, 30 minutes by default.
      if (name_unknown && !said_unknown) {
        said_unknown = true;
        log_line("distcomm: " + wait.where + ": the store's host '" + host +
                 "' is not a known host name (its DNS says so); init retries until its deadline in case its record "
                 "is yet to appear (a host that is not up yet): check MASTER_ADDR or the init_method");
      }
      return false;
    }
  };
  const std::string not_there = where + " is not its address (MASTER_ADDR/MASTER_PORT), or a firewall drops the connection";
  try {
    if (launcher_serves) {
      wait.until_named("the launcher", "to serve the store at " + where, probe,
                       "the launcher (" + std::string(local::kStoreServedByVariable) +
                           "=launcher) serves it from before the ranks start: it has exited, or " + not_there);
      return;
    }
    wait.until("to start the store at " + where, probe, [] { return std::vector<int>{0}; },
               "rank 0 has not called init_process_group yet, or " + not_there);
  } catch (const Timeout& e) {
    // What the last attempt met tells those causes apart: a refused connection (nobody
    // listens yet), no route, or a name its DNS server never answered.
    if (last_attempt.empty()) throw;
    throw Timeout(std::string(e.what()) + "; the last attempt: " + last_attempt);
  }
}

// Whether the launcher, not rank 0, serves the TCPStore of init_method m.
bool launcher_serves_store(const InitOptions& o, const std::string& m, const std::string& from_environment) {
  switch (o.store_served_by) {
    case StoreServedBy::kRankZero: return false;
    case StoreServedBy::kLauncher: return true;
    case StoreServedBy::kEnvironment: break;
  }
  // The launcher serves the store at MASTER_ADDR:MASTER_PORT, which only env:// reads.
  return m.rfind("env://", 0) == 0 && parse_store_served_by_launcher(from_environment);
}

// text: where the store is, for messages; served_by: the process that serves it ("rank 0",
// "the launcher"), if one of the job's does.
StorePtr make_store(const InitOptions& o, int rank, int world, const InitEnvironment& environment,
                    const InitWait& wait, std::map<std::string, std::string>* config, std::string* text,
                    std::string* served_by) {
  const LaunchEnv& env = environment.launch;
  if (o.store) {
    *text = "the program's store";
    return o.store;
  }
  const std::string& m = o.init_method;
  *text = m.rfind("env://", 0) == 0 ? "env://, MASTER_ADDR " + env.master_addr + " MASTER_PORT " +
                                         (env.master_port < 0 ? std::string() : std::to_string(env.master_port))
                                    : m;
  auto tcp = [&](const std::string& host, int port) -> StorePtr {
    (*config)["master_addr"] = host;
    // Served by the launcher, the store outlives every rank; rank 0 is then one more client.
    const bool launcher_serves = launcher_serves_store(o, m, environment.store_served_by);
    const bool client = rank != 0 || launcher_serves;
    if (client && port == 0) {
      throw InvalidArgument("rank " + std::to_string(rank) + ": the store at " + internal::host_port(host, port) +
                            " has no port to connect to (port 0 is for the server to pick one)");
    }
    if (client) wait_for_store_server(host, port, launcher_serves, wait);
    TCPStoreOptions so;
    so.host = host;
    so.port = port;
    so.is_server = rank == 0 && !launcher_serves;
    so.num_workers = world;
    so.timeout = o.timeout;  // also its gets' and waits' default, later
    so.identity = o.identity;
    so.bind_address = o.store_bind;
    *served_by = launcher_serves ? "the launcher" : "rank 0";
    return std::make_shared<TCPStore>(so);
  };
  if (m.rfind("env://", 0) == 0) {
    const std::string& addr = env.master_addr;
    const int port = env.master_port;
    if (addr.empty() || port < 0) {
      throw InvalidArgument("init_method env:// needs MASTER_ADDR and MASTER_PORT (rank " + std::to_string(rank) +
                            "): set them, start the job with tools/launch, or use tcp://host:port" +
                            (env.source == "mpirun" ? std::string("; under mpirun, backend 'mpi' needs neither "
                                                                  "(InitOptions.backend = \"mpi\", or DISTCOMM_BACKEND=mpi)")
                                                    : std::string()));
    }
    return tcp(addr, port);
  }
  if (m.rfind("tcp://", 0) == 0) {
    auto [host, port] = split_host_port(m.substr(6), "init_method '" + m + "'");
    return tcp(host, port);
  }
  if (m.rfind("file://", 0) == 0) {
    const std::string path = m.substr(7);
    if (path.empty()) throw InvalidArgument("init_method '" + m + "' has no path");
    auto store = std::make_shared<FileStore>(path, world, o.identity.run_id);
    store->set_timeout(o.timeout);
    return store;
  }
  throw InvalidArgument("init_method '" + m + "': expected env://, tcp://host:port or file:///path");
}

}  // namespace

std::map<std::string, std::string> backend_config_as_init_gives(const std::string& backend,
                                                                std::map<std::string, std::string> given) {
  const LaunchEnv env = read_launch_env();
  const PluginSearch plugins = PluginSearch::from_environment();
  fill_config(given, BackendSpec::parse(backend), env, plugins);
  if (!env.master_addr.empty()) given.emplace("master_addr", env.master_addr);
  return given;
}

ProcessGroupPtr init_process_group(InitOptions o) {
  const auto started = std::chrono::steady_clock::now();
  hold_default_across_fork();
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_default) {
      throw InvalidArgument("init_process_group called twice; call destroy_process_group() first");
    }
  }
  // Before anything is sent: a group's timeout of 0 or less would end init, and every op that
  // sets none of its own, at once (and an op's own 0 is refused, timeouts.h).
  if (o.timeout <= std::chrono::milliseconds::zero()) {
    throw InvalidArgument("init_process_group: InitOptions.timeout=" + std::to_string(o.timeout.count()) +
                          " ms: give a positive timeout (the default is 30 minutes)");
  }
  // The environment is read here, at the edge, once (environment.h); below, nothing reads it.
  const InitEnvironment environment = InitEnvironment::read();
  // A bad DISTCOMM_DEBUG is refused before rank 0 serves anything; and the level is set before
  // the first plugin loads (the spec's backends are asked below whether they need a store):
  // the loader's INFO line, a plugin that hides a built-in one, is said as it loads or never.
  const DebugLevel debug = parse_debug_level(o.debug.empty() ? environment.debug : o.debug);
  set_plugin_debug_level(debug);
  const LaunchEnv& env = environment.launch;
  const PluginSearch& plugins = environment.process.plugins;
  if (o.backend.empty()) o.backend = environment.backend;
  // auto: shm when the group's ranks share a host, the hierarchy or gloo across hosts, and
  // CUDA tensors to nccl where every rank can run it (group/auto_backend.h).
  if (o.backend.empty()) o.backend = "auto";
  // rank and world_size in the init_method's query, as torch takes them (group/init_method.h).
  const std::string given_method = o.init_method;
  const InitMethodParts method = split_init_method(given_method);
  o.init_method = method.method;
  int rank = agreed_value("rank", o.rank, method.rank, env.rank, given_method);
  int world = agreed_value("world_size", o.world_size, method.world_size, env.world_size, given_method);

  const BackendSpec spec = BackendSpec::parse(o.backend);  // once, here
  // A backend that finds its peers by itself (MPI) needs no store or address.
  const bool finds_peers_itself = !spec.needs_store(plugins);
  if (finds_peers_itself && rank < 0 && world < 0) {
    rank = 0;  // a singleton run without mpirun; the backend checks its own view
    world = 1;
  }
  if (rank < 0 && world < 0) {
    throw InvalidArgument(
        "init_process_group: rank and world size are unknown: pass InitOptions.rank/world_size, or set "
        "RANK and WORLD_SIZE (tools/launch does), or run under mpirun or srun");
  }
  if (rank < 0 || world < 0) {
    // One of the two: say which is missing, in the launcher's words.
    const LaunchVariables names = launch_variables(env.source);
    const std::string set_world =
        names.world_size.empty() ? "pass InitOptions.world_size (a " + env.source + " launcher sets no variable for it)"
                                 : "set " + names.world_size + " (or InitOptions.world_size) too";
    throw InvalidArgument(rank >= 0 ? "init_process_group: the rank is " + std::to_string(rank) +
                                          " but the world size is unknown: " + set_world
                                    : "init_process_group: the world size is " + std::to_string(world) +
                                          " but the rank is unknown: set " + names.rank + " (or InitOptions.rank) too");
  }
  if (world < 1 || rank >= world) {
    throw InvalidArgument("init_process_group: rank " + std::to_string(rank) + " is outside world size " +
                          std::to_string(world));
  }
  std::map<std::string, std::string> config = o.backend_config;
  fill_config(config, spec, env, plugins);
  if (o.identity.run_id.empty() && o.identity.token.empty()) o.identity = environment.identity;
  if (o.store_bind.empty()) o.store_bind = environment.store_bind;
  set_log_identity(rank, world);
  const std::chrono::milliseconds report_every =
      o.init_report_interval > std::chrono::milliseconds::zero() ? o.init_report_interval
                                                                 : parse_init_report_seconds(environment.init_report_seconds);
  // Read again by each group's stall watch as its backend starts, after that backend's
  // rendezvous: checked here too, so that a bad value fails every rank alike before anything
  // is sent, not one rank after its connections were made (its peers would see them close).
  stall_report_interval(kDefaultStallReportInterval);
  InitWait wait = InitWait::starting_now(o.timeout, report_every,
                                         "rank " + std::to_string(rank) + "/" + std::to_string(world) + " init");
  wait.started = started;
  wait.deadline = started + o.timeout;

  ProcessGroupOptions po;
  // It gets one all the same when the program names one (a store, or an init_method other
  // than the default): then its failures can name the ranks that caused them.
  const bool store_named = o.store || o.init_method != InitOptions().init_method;
  if (store_named || !finds_peers_itself) po.store = make_store(o, rank, world, environment, wait, &config, &po.store_text, &po.store_host);
  if (po.store) po.store->set_timeout(o.timeout);
  po.rank = rank;
  po.size = world;
  po.backend = spec.text;  // the spec's own spelling: names in lower case
  po.timeout = o.timeout;
  po.backend_config = config;
  po.debug = debug;
  po.environment = environment.process;
  po.creation_deadline = wait.deadline;
  po.creation_report_every = report_every;
  ProcessGroupPtr pg = ProcessGroup::create(po, spec);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_default) {
      g_default = pg;
      return pg;
    }
  }
  // Another thread's init won meanwhile: this group goes (outside g_mu: a teardown is long,
  // and a fork() waits for g_mu), and the call fails as a second init does.
  throw InvalidArgument("init_process_group called twice (by two threads at once); call destroy_process_group() first");
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_default != nullptr;
}

ProcessGroupPtr default_group_ptr() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_default) throw InvalidArgument("no default process group: call init_process_group() first");
  return g_default;
}

ProcessGroup& default_group() { return *default_group_ptr(); }

void destroy_process_group() {
  ProcessGroupPtr ending;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ending.swap(g_default);
  }
  ending.reset();  // the teardown, outside g_mu (above)
}

}  // namespace distcomm
