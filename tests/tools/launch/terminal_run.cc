// terminal_run COMMAND...: runs COMMAND with a terminal of its own, as a user's shell runs a
// launcher, and types a Ctrl-C at that terminal when this process gets SIGUSR1. The kernel
// then sends SIGINT to the terminal's foreground process group, with no sender pid (si_pid
// 0), as a real Ctrl-C does; a test cannot make that signal with kill(). stdin of COMMAND is
// the terminal; its stdout and stderr stay this process's, for the test to read. Exits as
// COMMAND did (128 + the signal when a signal ended it).
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace {

volatile sig_atomic_t g_type_ctrl_c = 0;
void on_usr1(int) { g_type_ctrl_c = 1; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: terminal_run COMMAND...\n");
    return 2;
  }
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) {
    std::perror("terminal_run: posix_openpt");
    return 1;
  }
  const char* slave_name = ::ptsname(master);
  struct sigaction sa = {};
  sa.sa_handler = on_usr1;  // no SA_RESTART: the wait below returns to type the Ctrl-C
  ::sigaction(SIGUSR1, &sa, nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("terminal_run: fork");
    return 1;
  }
  if (child == 0) {
    // A session of its own, whose controlling terminal is the pty: its process group is
    // the terminal's foreground group.
    ::setsid();
    const int slave = ::open(slave_name, O_RDWR);
    if (slave < 0 || ::ioctl(slave, TIOCSCTTY, 0) != 0) {
      std::perror("terminal_run: the terminal");
      ::_exit(127);
    }
    ::dup2(slave, STDIN_FILENO);
    ::close(slave);
    ::close(master);
    ::signal(SIGUSR1, SIG_DFL);
    ::execvp(argv[1], argv + 1);
    std::perror("terminal_run: exec");
    ::_exit(127);
  }
  int status = 0;
  // Polled, not a blocking waitpid: a SIGUSR1 just before the call would wait unseen.
  for (;;) {
    if (g_type_ctrl_c) {
      g_type_ctrl_c = 0;
      struct termios t;
      const char ctrl_c = ::tcgetattr(master, &t) == 0 ? static_cast<char>(t.c_cc[VINTR]) : '\x03';
      if (::write(master, &ctrl_c, 1) != 1) std::perror("terminal_run: typing the Ctrl-C");
    }
    const pid_t r = ::waitpid(child, &status, WNOHANG);
    if (r == child) break;
    if (r < 0 && errno != EINTR) {
      std::perror("terminal_run: waitpid");
      return 1;
    }
    ::usleep(20000);
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
