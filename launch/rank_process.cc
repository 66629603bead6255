#include "launch/rank_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace distcomm {
namespace launch {
namespace {

// close_range's flag (linux/close_range.h, which older kernel headers lack): mark close-on-exec
// rather than close now.
constexpr unsigned kCloseRangeCloexec = 1u << 2;
// Where close_range cannot (before Linux 5.11, or headers without it), descriptors are
// marked one by one up to the soft limit, at most this many (the launcher's own are far
// below; a program handing a rank descriptors above it is not expected).
constexpr int kMarkAtMost = 65536;

// In the forked child: async-signal-safe calls only. Marks every descriptor from `first` up
// close-on-exec.
void mark_close_on_exec_from(int first) {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, static_cast<unsigned>(first), ~0u, kCloseRangeCloexec) == 0) return;
#endif
  rlimit limit{};
  int end = kMarkAtMost;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < static_cast<rlim_t>(end)) {
    end = static_cast<int>(limit.rlim_cur);
  }
  for (int fd = first; fd < end; ++fd) {
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC)) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

bool is_executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The step between fork and execve that failed: each is said as itself, since an ENOENT from
// opening /dev/null (a minimal container's /dev) read as "could not run './prog'" sends the
// user looking for a program that is there.
enum class Step : int { kOpenNull, kStdin, kStdout, kStderr, kChdir, kExec };

// What the child hands the parent when a step fails.
struct StartFailure {
  Step step;
  int err;
};

// In the child: hands the failed step and errno to the parent through the close-on-exec
// pipe `report`.
[[noreturn]] void report_and_exit(int report, Step step) {
  const StartFailure failure{step, errno};
  ssize_t ignored = ::write(report, &failure, sizeof(failure));
  (void)ignored;
  ::_exit(127);
}

// "rank 0 could not run './ar' in /w: <why>", or the step before execve that failed.
std::string start_failure_text(const StartFailure& f, int rank, const std::string& path,
                               const std::string& working_dir) {
  const std::string who = "rank " + std::to_string(rank);
  const std::string why = std::strerror(f.err);
  switch (f.step) {
    case Step::kOpenNull:
      return "cannot open /dev/null for " + who + "'s standard input: " + why;
    case Step::kStdin:
      return "cannot make /dev/null " + who + "'s standard input (dup2): " + why;
    case Step::kStdout:
      return "cannot connect " + who + "'s standard output to the launcher (dup2): " + why;
    case Step::kStderr:
      return "cannot connect " + who + "'s standard error to the launcher (dup2): " + why;
    case Step::kChdir:
      return who + " cannot change into its working directory " + working_dir + ": " + why;
    case Step::kExec:
      break;
  }
  return who + " could not run '" + path + "'" + (working_dir.empty() ? "" : " in " + working_dir) + ": " + why;
}

// Runs in the forked child: only async-signal-safe calls until execve.
[[noreturn]] void exec_child(const char* path, char* const* argv, char* const* envp,
                             const char* working_dir, int out_w, int err_w, int report, pid_t parent) {
  ::setpgid(0, 0);
  // The launcher's death (even SIGKILL) must not leave ranks running on their own.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) report_and_exit(report, Step::kOpenNull);
  if (::dup2(null_fd, 0) < 0) report_and_exit(report, Step::kStdin);
  if (::dup2(out_w, 1) < 0) report_and_exit(report, Step::kStdout);
  if (::dup2(err_w, 2) < 0) report_and_exit(report, Step::kStderr);
  // A rank gets standard input, output and error, nothing else of the launcher's (its store's
  // sockets, other ranks' pipes, what the launcher inherited), as torchrun's workers do
  // (Python's close_fds): every other descriptor closes at execve. `report` stays open
  // until then.
  mark_close_on_exec_from(3);
  // Ignored signals and the blocked mask survive execve; the launcher ignores SIGPIPE.
  ::signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (working_dir[0] != '\0' && ::chdir(working_dir) != 0) report_and_exit(report, Step::kChdir);
  ::execve(path, argv, envp);
  report_and_exit(report, Step::kExec);
}

}  // namespace

std::string find_program(const std::string& program, const std::string& working_dir) {
  if (program.find('/') != std::string::npos) {
    std::string path = (program[0] == '/' || working_dir.empty()) ? program : working_dir + "/" + program;
    if (!is_executable_file(path)) {
      struct stat st;
      if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) throw std::invalid_argument("'" + path + "' does not exist");
      throw std::invalid_argument("'" + path + "' is not an executable file");
    }
    return program;  // execve runs after chdir(working_dir), so keep it relative
  }
  const char* path_env = std::getenv("PATH");
  std::string dirs = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream in(dirs);
  std::string dir;
  while (std::getline(in, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (is_executable_file(candidate)) return candidate;
  }
  throw std::invalid_argument("'" + program + "' not found in $PATH (" + dirs + ")");
}

RankProcess start_rank(const std::string& path, const std::vector<std::string>& argv,
                       const std::vector<std::string>& env, const std::string& working_dir,
                       int local_rank, int rank) {
  int out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
  // A failed start leaves no descriptor behind (the launcher then stops the ranks started
  // before this one, and may try again).
  auto close_all = [&] {
    for (int* fd : {&out[0], &out[1], &err[0], &err[1], &report[0], &report[1]}) close_fd(*fd);
  };
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(report, O_CLOEXEC) != 0) {
    const int e = errno;
    close_all();
    throw std::runtime_error(std::string("pipe: ") + std::strerror(e));
  }
  std::vector<char*> argv_c = c_strings(argv);
  std::vector<char*> env_c = c_strings(env);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    close_all();
    throw std::runtime_error(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    exec_child(path.c_str(), argv_c.data(), env_c.data(), working_dir.c_str(), out[1], err[1], report[1], parent);
  }
  // Also set here: the parent may signal the group before the child has run setpgid.
  ::setpgid(pid, pid);
  ::close(out[1]);
  ::close(err[1]);
  ::close(report[1]);

  RankProcess p;
  p.local_rank = local_rank;
  p.rank = rank;
  p.pid = pid;
  p.stdout_fd = out[0];
  p.stderr_fd = err[0];

  StartFailure failure{Step::kExec, 0};
  ssize_t n;
  do {
    n = ::read(report[0], &failure, sizeof(failure));  // one write of a few bytes: whole or nothing
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n > 0) {  // a step up to execve failed: the pipe would have closed silently on success
    ::waitpid(pid, nullptr, 0);
    close_fd(p.stdout_fd);
    close_fd(p.stderr_fd);
    throw std::runtime_error(start_failure_text(failure, rank, path, working_dir));
  }
  return p;
}

}  // namespace launch
}  // namespace distcomm
