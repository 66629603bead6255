#include "tests/testing/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace distcomm {
namespace testing {

using Clock = std::chrono::steady_clock;

Subprocess::Subprocess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                       bool merge_stderr) {
  int err[2] = {-1, -1};
  if (!merge_stderr && ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  start(argv, extra_env, err[1], err[0]);  // -1: stderr goes where stdout goes
}

Subprocess::Subprocess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                       const StderrToFile& to) {
  const int err = ::open(to.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (err < 0) throw std::runtime_error("Subprocess: cannot create " + to.path);
  start(argv, extra_env, err, -1);
}

void Subprocess::start(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                       int err_target, int err_read) {
  if (argv.empty()) throw std::invalid_argument("Subprocess: no program");
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  // getenv() returns the first match: the extra entries go first to override.
  std::vector<std::string> env = extra_env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  std::vector<char*> argv_c, env_c;
  for (const auto& a : argv) argv_c.push_back(const_cast<char*>(a.c_str()));
  argv_c.push_back(nullptr);
  for (const auto& e : env) env_c.push_back(const_cast<char*>(e.c_str()));
  env_c.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::dup2(out[1], 1);
    ::dup2(err_target >= 0 ? err_target : out[1], 2);
    ::execvpe(argv_c[0], argv_c.data(), env_c.data());
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);  // also here: the deadline may come before the child has run
  ::close(out[1]);
  out_fd_ = out[0];
  if (err_target >= 0) ::close(err_target);
  err_fd_ = err_read;
}

Subprocess::~Subprocess() {
  if (!reaped_) {
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

bool Subprocess::pump(std::chrono::milliseconds wait) {
  std::vector<pollfd> fds;
  if (out_fd_ >= 0) fds.push_back({out_fd_, POLLIN, 0});
  if (err_fd_ >= 0) fds.push_back({err_fd_, POLLIN, 0});
  if (fds.empty()) return false;
  ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
  for (const pollfd& p : fds) {
    if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buf[65536];
    ssize_t n = ::read(p.fd, buf, sizeof(buf));
    std::string& sink = p.fd == out_fd_ ? result_.out : result_.err;
    if (n > 0) {
      sink.append(buf, static_cast<size_t>(n));
    } else {
      ::close(p.fd);
      (p.fd == out_fd_ ? out_fd_ : err_fd_) = -1;
    }
  }
  return true;
}

bool Subprocess::wait_for_stdout(const std::string& text, int count, std::chrono::milliseconds deadline) {
  Clock::time_point end = Clock::now() + deadline;
  while (Clock::now() < end) {
    int seen = 0;
    for (size_t pos = result_.out.find(text); pos != std::string::npos; pos = result_.out.find(text, pos + 1)) ++seen;
    if (seen >= count) return true;
    if (!pump(std::chrono::milliseconds(20))) return false;
  }
  return false;
}

void Subprocess::send_signal(int sig) { ::kill(pid_, sig); }

size_t Subprocess::stdout_unread() const {
  int queued = 0;
  return out_fd_ >= 0 && ::ioctl(out_fd_, FIONREAD, &queued) == 0 ? static_cast<size_t>(queued) : 0;
}

Finished Subprocess::finish(std::chrono::milliseconds deadline) {
  Clock::time_point end = Clock::now() + deadline;
  int status = 0;
  while (true) {
    pump(std::chrono::milliseconds(20));
    if (::waitpid(pid_, &status, WNOHANG) == pid_) break;
    if (Clock::now() >= end) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      result_.timed_out = true;
      break;
    }
  }
  // The output that was still in the pipes (short deadline: leftovers may hold them open).
  Clock::time_point drain_end = Clock::now() + std::chrono::seconds(2);
  while ((out_fd_ >= 0 || err_fd_ >= 0) && Clock::now() < drain_end) pump(std::chrono::milliseconds(20));
  reaped_ = true;
  result_.status = result_.timed_out ? -1 : status;
  return result_;
}

Finished run(const std::vector<std::string>& argv, std::chrono::milliseconds deadline,
             const std::vector<std::string>& extra_env) {
  Subprocess p(argv, extra_env);
  return p.finish(deadline);
}

int exit_code(const Finished& f) { return WIFEXITED(f.status) ? WEXITSTATUS(f.status) : -1; }

int shell_exit_code(const Finished& f) {
  if (f.timed_out) return -1;
  return WIFEXITED(f.status) ? WEXITSTATUS(f.status) : 128 + WTERMSIG(f.status);
}

ProgramOutcome run_program(const std::vector<std::string>& argv, int timeout_s,
                           const std::vector<std::string>& extra_env) {
  Subprocess p(argv, extra_env, /*merge_stderr=*/true);
  const Finished f = p.finish(std::chrono::seconds(timeout_s));
  ProgramOutcome outcome;
  outcome.output = f.out;
  if (f.timed_out) {
    outcome.exit_code = 128 + SIGKILL;
    outcome.output += "\n[test: killed after " + std::to_string(timeout_s) + " s]";
  } else {
    outcome.exit_code = shell_exit_code(f);
  }
  return outcome;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

bool process_exists(pid_t pid) {
  struct stat st;
  return ::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace testing
}  // namespace distcomm
