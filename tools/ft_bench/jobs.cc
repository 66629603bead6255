#include "tools/ft_bench/jobs.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>

#include "api/process/job_identity.h"
#include "api/process/local_processes.h"
#include "api/store/server/tcp_store_server.h"
#include "launch/job.h"
#include "tools/ft_bench/event_log.h"

namespace distcomm {
namespace ft_bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string self_executable() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) throw std::runtime_error("ft_bench: cannot read /proc/self/exe");
  return std::string(path, static_cast<size_t>(n));
}

std::string fresh_dir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/ft_bench_" + name + "_XXXXXX";
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("ft_bench: cannot create " + pattern);
  return pattern;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// fork + exec of this program with `args`, its environment plus `env`. Everything is
// built before fork: the store server's thread runs here, and the child only execs.
// stderr_path: the child's stderr goes to this file instead.
pid_t start_worker(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                   const std::string& stderr_path = "") {
  std::vector<std::string> argv_text{self_executable()};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const auto eq = entry.find('=');
    if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> env_text;
  for (const auto& [k, v] : merged) env_text.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  int err_fd = -1;
  if (!stderr_path.empty()) {
    err_fd = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (err_fd < 0) throw std::runtime_error("ft_bench: cannot create " + stderr_path);
  }
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("ft_bench: fork failed");
  if (pid == 0) {
    if (err_fd >= 0 && ::dup2(err_fd, 2) < 0) ::_exit(127);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  if (err_fd >= 0) ::close(err_fd);
  return pid;
}

}  // namespace

std::vector<std::string> worker_arguments(const WorkerConfig& c, const std::string& kind) {
  return {"--worker=" + kind,
          "--steps=" + std::to_string(c.steps),
          "--kill_rank=" + std::to_string(c.kill_rank),
          "--kill_step=" + std::to_string(c.kill_step),
          "--kills=" + format_kills(c.kills),
          "--kill_in_recovery=" + c.kill_in_recovery + (c.kill_once_arrived ? "@arrived" : ""),
          std::string("--await_joiner=") + (c.await_joiner ? "true" : "false"),
          "--step_ms=" + std::to_string(c.step_ms),
          "--layers=" + std::to_string(c.shape.layers),
          "--width=" + std::to_string(c.shape.width),
          "--global_batch=" + std::to_string(c.shape.global_batch),
          "--checkpoint_every=" + std::to_string(c.checkpoint_every),
          "--heartbeat_timeout_s=" + std::to_string(c.heartbeat_timeout_s),
          "--log_dir=" + c.log_dir};
}

RunOutcome run_ft_job(const BenchConfig& config, const std::string& name, bool with_failure) {
  RunOutcome out;
  out.name = name;
  out.log_dir = fresh_dir(name);
  WorkerConfig worker = config.worker;
  worker.log_dir = out.log_dir;
  if (!with_failure) {
    worker.kill_rank = -1;
    worker.kills.clear();
    worker.kill_in_recovery.clear();
  }
  // A replacement is started only when the first victim has died.
  worker.await_joiner = config.rejoin_after_s >= 0 && !worker.kills.empty();
  const Clock::time_point began = Clock::now();

  // This process serves the store, so that the store outlives every rank, rank 0 included.
  TCPStoreServerOptions so;
  so.bind_address = "127.0.0.1";
  so.identity = new_job_identity();
  TCPStoreServer server(so);
  server.start();
  std::map<std::string, std::string> env{{"MASTER_ADDR", "127.0.0.1"},
                                         {"MASTER_PORT", std::to_string(server.port())},
                                         {"WORLD_SIZE", std::to_string(config.nproc)},
                                         {"LOCAL_WORLD_SIZE", std::to_string(config.nproc)},
                                         {"DISTCOMM_BACKEND", config.backend},
                                         {"DISTCOMM_STORE_SERVED_BY", "launcher"},
                                         {kRunIdVariable, so.identity.run_id},
                                         {kStoreTokenVariable, so.identity.token}};
  const std::vector<std::string> args = worker_arguments(worker, "ft");
  std::map<pid_t, std::string> running;  // pid -> member
  for (int r = 0; r < config.nproc; ++r) {
    auto e = env;
    e["RANK"] = e["LOCAL_RANK"] = std::to_string(r);
    running[start_worker(args, e)] = "rank" + std::to_string(r);
  }
  // Who is to die: every kill's member, and the one killed in recovery.
  std::map<std::string, bool> victims;  // member -> died by SIGKILL
  for (const Kill& k : worker.kills) victims[k.member] = false;
  if (!worker.kill_in_recovery.empty()) victims[worker.kill_in_recovery] = false;
  const std::string first_victim = worker.kills.empty() ? "" : worker.kills.front().member;
  std::optional<Clock::time_point> replace_at;
  std::optional<Clock::time_point> refuse_at;
  if (with_failure && config.refused_joiner_after_s >= 0) {
    refuse_at = began + std::chrono::milliseconds(static_cast<int64_t>(config.refused_joiner_after_s * 1000));
  }
  const std::string refused_id = "refused+1";
  const std::string refused_stderr = out.log_dir + "/" + refused_id + ".stderr";
  pid_t refused_pid = -1;
  int refused_status = 0;
  const Clock::time_point deadline = began + std::chrono::milliseconds(static_cast<int64_t>(config.time_limit_s * 1000));
  while (!running.empty() || replace_at || refuse_at) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      const std::string member = running[pid];
      running.erase(pid);
      if (pid == refused_pid) {
        refused_status = status;
        out.refused_ended_ns = wall_ns();
        continue;
      }
      const bool victim = victims.count(member) > 0;
      const bool expected_death = victim && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
      if (expected_death) victims[member] = true;
      if (expected_death && member == first_victim && config.rejoin_after_s >= 0) {
        replace_at = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(config.rejoin_after_s * 1000));
      } else if (!expected_death && !local::exited_cleanly(status) && out.error.empty()) {
        out.error = member + " ended with " + local::describe_wait_status(status);
      }
      continue;
    }
    if (replace_at && Clock::now() >= *replace_at) {
      replace_at.reset();
      auto e = env;
      e["DISTCOMM_FT_JOIN"] = "1";
      e["DISTCOMM_FT_MEMBER_ID"] = first_victim + "+1";
      running[start_worker(args, e)] = first_victim + "+1";
    }
    if (refuse_at && Clock::now() >= *refuse_at) {
      refuse_at.reset();
      // Another width: another state signature.
      WorkerConfig other = worker;
      other.shape.width += 1;
      other.kills.clear();
      other.kill_in_recovery.clear();
      auto e = env;
      e["DISTCOMM_FT_JOIN"] = "1";
      e["DISTCOMM_FT_MEMBER_ID"] = refused_id;
      refused_pid = start_worker(worker_arguments(other, "ft"), e, refused_stderr);
      running[refused_pid] = refused_id;
      out.refused_started = true;
    }
    if (Clock::now() >= deadline) {
      for (const auto& [p, member] : running) ::kill(p, SIGKILL);
      for (const auto& [p, member] : running) ::waitpid(p, nullptr, 0);
      if (out.error.empty()) out.error = "stopped after " + std::to_string(config.time_limit_s) + " s";
      running.clear();
      replace_at.reset();
      refuse_at.reset();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  server.stop();
  out.wall_s = seconds(Clock::now() - began);
  for (const auto& [member, died] : victims) {
    if (!died && out.error.empty()) out.error = member + " was to be SIGKILLed and was not";
  }
  if (out.refused_started) {
    // Its stderr, also shown here as the other workers' is.
    std::ifstream in(refused_stderr);
    std::string line, all, refused_line;
    while (std::getline(in, line)) {
      all += line + "\n";
      if (line.find("InvalidArgument") != std::string::npos && out.refused_message.empty()) out.refused_message = line;
      if (line.find("refused:") != std::string::npos && refused_line.empty()) refused_line = line;
    }
    if (out.refused_message.empty()) out.refused_message = refused_line;
    std::fprintf(stderr, "%s", all.c_str());
    out.refused_exit = local::describe_wait_status(refused_status);
    WorkerConfig other = worker;
    other.shape.width += 1;
    const std::string mine = Training::signature_of(other.shape), theirs = Training::signature_of(worker.shape);
    const std::string& m = out.refused_message;
    out.refused_as_expected = WIFEXITED(refused_status) && WEXITSTATUS(refused_status) != 0 &&
                              m.find("InvalidArgument") != std::string::npos &&
                              m.find("'" + mine + "'") != std::string::npos && m.find("'" + theirs + "'") != std::string::npos;
    if (!out.refused_as_expected && out.error.empty()) {
      out.error = "the joiner with another state (" + mine + ") ended with " + out.refused_exit + ", not refused as expected" +
                  (m.empty() ? "" : ": " + m);
    }
  }
  out.ok = out.error.empty();
  return out;
}

RunOutcome run_restart_job(const BenchConfig& config) {
  RunOutcome out;
  out.name = "restart";
  out.in_process = false;
  out.log_dir = fresh_dir("restart");
  WorkerConfig worker = config.worker;
  worker.log_dir = out.log_dir;
  launch::LaunchOptions lo;
  lo.command = {self_executable()};
  for (const std::string& a : worker_arguments(worker, "restart")) lo.command.push_back(a);
  lo.nproc_per_node = config.nproc;
  lo.backend = config.backend;
  lo.max_restarts = worker.kill_rank >= 0 ? 1 : 0;
  lo.tag = "ft_bench (restart path)";
  const Clock::time_point began = Clock::now();
  const launch::JobResult result = launch::run_job(lo);
  out.wall_s = seconds(Clock::now() - began);
  out.ok = result.exit_code == 0;
  if (!out.ok) out.error = result.failure.empty() ? "exit code " + std::to_string(result.exit_code) : result.failure;
  return out;
}

}  // namespace ft_bench
}  // namespace distcomm
