// A stand-in for a rank in the launcher tests: it does what its arguments say.
//
//   rank_probe env                    print this rank's launch variables on one line
//   rank_probe fds                    print this process's open descriptors ("fds: 0 1 2")
//   rank_probe wait [ignore_term]     start a grandchild, print "ready <pid> <grandchild pid>",
//                                     then wait to be stopped (ignoring SIGTERM if asked)
//   rank_probe fail <rank> <code> [ignore_term]
//                                     like wait (the others ignoring SIGTERM if asked), but
//                                     that rank exits with code once every rank is ready
//   rank_probe fail_first <rank> <code>
//                                     on the job's first attempt (DISTCOMM_RESTART_COUNT 0)
//                                     as fail; on a restarted attempt as env
//   rank_probe fail_first_then_wait <rank> <code>
//                                     as fail_first, but a restarted attempt's ranks wait
//                                     to be stopped (as wait)
//   rank_probe signal <rank> <sig>    like wait, but that rank kills itself with signal sig
//   rank_probe say_signal             like wait, but prints "rank <rank> got <SIGNAME>" for
//                                     SIGINT, SIGTERM, SIGHUP or SIGQUIT, then dies of it
//   rank_probe lines <n>              print n numbered lines to stdout and to stderr, each in
//                                     several ragged write() calls
//   rank_probe multiline_error        reports (and prints) an error of two lines, the first
//                                     ending "Searched:", and exits with code 1
//   rank_probe cascade <rank>         that rank reports a failure in its DISTCOMM_ERROR_FILE,
//                                     then takes 500 ms to exit (code 5, ignoring SIGTERM);
//                                     the others exit with code 1 as soon as it has reported
//   rank_probe adopted <rank>         that rank reports its own failure, stamped 1 s late (the
//                                     rank that fails first writes last: it publishes and
//                                     cuts its connections first), then waits for the stop's
//                                     SIGTERM; the others, once it has reported, report that
//                                     failure as theirs (consequence) and exit with code 1
//   rank_probe late_finder <rank>     that rank publishes a failure (a file), and once the
//                                     others have reported it as theirs (consequence) and
//                                     exited with code 1, takes 300 ms more to report its own
//                                     and exit with code 1 (a SIGTERM before then ends it
//                                     unreported, as it would a finder still cutting its
//                                     connections)
//   rank_probe victim <rank> [exit]   that rank writes its pid to <TEST_TMPDIR>/victim_pid,
//                                     prints "victim <pid>" and waits to be killed (with
//                                     "exit": exits with code 3, reporting nothing, on SIGUSR2);
//                                     the others, once it has died (a zombie is dead), report
//                                     "rank <rank> died" in their DISTCOMM_ERROR_FILE (its loss,
//                                     FailureReport::lost_rank, as the core's reports say it),
//                                     write their pid to <TEST_TMPDIR>/reported_<their rank>
//                                     and exit with code 1
//   rank_probe victims <rank> <rank>  those two ranks write their pids to
//                                     <TEST_TMPDIR>/victim_pid_<rank>, print "victim <pid>" and
//                                     wait to be killed; the others wait to be stopped
//   rank_probe replaced <rank> <code> [<replacement code>]
//                                     that rank exits with code at once; its replacement
//                                     (DISTCOMM_FT_JOIN=1) prints "replacement <member id>
//                                     RANK=<rank>" and exits with <replacement code> (0); the
//                                     others wait for a replacement that succeeds (its file
//                                     <TEST_TMPDIR>/replaced_<rank>), 3 s at most, then exit 0
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "api/process/failure_report.h"

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

std::string env_str(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "<unset>";
}

void write_text(int fd, const std::string& s) {
  if (::write(fd, s.data(), s.size()) != static_cast<ssize_t>(s.size())) std::_Exit(99);
}

void print_env() {
  std::string line;
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                           "DISTCOMM_BACKEND", "OMPI_COMM_WORLD_RANK", "DISTCOMM_RESTART_COUNT",
                           "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "DISTCOMM_RUN_ID",
                           "DISTCOMM_STORE_SERVED_BY", "TORCHELASTIC_RUN_ID"}) {
    line += std::string(line.empty() ? "" : " ") + name + "=" + env_str(name);
  }
  char cwd[4096];
  line += std::string(" cwd=") + (::getcwd(cwd, sizeof(cwd)) ? cwd : "?") + "\n";
  write_text(1, line);
}

// Where the ranks of one job tell each other they are ready: a file per rank in the test's
// temporary folder, under the job's run id (the launcher gives every job its own).
std::string ready_file(int rank) {
  const char* run = std::getenv("DISTCOMM_RUN_ID");
  return env_str("TEST_TMPDIR") + "/probe_" + (run ? run : env_str("MASTER_PORT")) + "_ready_" + std::to_string(rank);
}

// Until every other rank of the job has said "ready" (a handshake, not a sleep: the test
// expects their lines before this rank fails and the launcher stops them).
void wait_for_the_others_to_be_ready() {
  for (int r = 0; r < env_int("WORLD_SIZE"); ++r) {
    if (r == env_int("RANK")) continue;
    for (int polls = 0; ::access(ready_file(r).c_str(), F_OK) != 0; ++polls) {
      if (polls == 60000) {
        std::fprintf(stderr, "rank_probe: rank %d never became ready\n", r);
        std::_Exit(97);
      }
      ::usleep(1000);
    }
  }
}

// "ready <pid> <grandchild>" once a grandchild (same process group) exists, then waits.
[[noreturn]] void wait_to_be_stopped(bool ignore_term) {
  if (ignore_term) ::signal(SIGTERM, SIG_IGN);
  // A SIGQUIT the launcher passes on (SigquitStopsEveryRank) must not leave cores.
  rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  pid_t grandchild = ::fork();
  if (grandchild == 0) {
    for (;;) ::pause();
  }
  // The job's identity after the pids: a restarted attempt must have a new one.
  write_text(1, "ready " + std::to_string(::getpid()) + " " + std::to_string(grandchild) + " run " +
                    env_str("DISTCOMM_RUN_ID") + " token " + env_str("DISTCOMM_STORE_TOKEN").substr(0, 12) + " port " +
                    env_str("MASTER_PORT") + "\n");
  std::ofstream(ready_file(env_int("RANK")));  // after the line: it is in the launcher's pipe by then
  for (;;) ::pause();
}

// say_signal's: the line each stopping signal prints, made before any can come (a handler
// may only write() and re-raise).
std::string g_said[NSIG];

void say_and_die(int sig) {
  const std::string& line = g_said[sig];
  ssize_t ignored = ::write(1, line.data(), line.size());
  (void)ignored;
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

[[noreturn]] void say_which_signal_stops_it() {
  for (const auto& [sig, name] : {std::pair<int, const char*>{SIGINT, "SIGINT"}, {SIGTERM, "SIGTERM"},
                                  {SIGHUP, "SIGHUP"}, {SIGQUIT, "SIGQUIT"}}) {
    g_said[sig] = "rank " + env_str("RANK") + " got " + name + "\n";
    ::signal(sig, say_and_die);
  }
  wait_to_be_stopped(false);
}

// Whether the process whose /proc/<pid>/stat this is has ended (a zombie, or reaped).
bool process_is_dead(const std::string& stat_path) {
  std::ifstream stat(stat_path);
  std::string pid, name, state;
  if (!(stat >> pid >> name >> state)) return true;
  return state == "Z" || state == "X";
}

void print_lines(int n) {
  const int rank = env_int("RANK");
  const std::string padding(200 + 37 * rank, 'x');
  for (int i = 0; i < n; ++i) {
    std::string line = "rank " + std::to_string(rank) + " line " + std::to_string(i) + " " + padding + "\n";
    for (int fd : {1, 2}) {
      // Ragged pieces: the launcher must put them back together, never mixing ranks.
      size_t cut1 = (i * 7 + rank) % line.size(), cut2 = std::max(cut1, line.size() - (i % 5));
      write_text(fd, line.substr(0, cut1));
      if (i % 10 == 0) ::usleep(1000);  // make sure the launcher sees half a line now and then
      write_text(fd, line.substr(cut1, cut2 - cut1));
      write_text(fd, line.substr(cut2));
    }
  }
}

// "fds: 0 1 2": the descriptors open in this process, but the one that lists them.
void print_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) {
    std::printf("fds: cannot list /proc/self/fd\n");
    return;
  }
  std::vector<int> fds;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    if (fd != ::dirfd(dir)) fds.push_back(fd);
  }
  ::closedir(dir);
  std::sort(fds.begin(), fds.end());
  std::string line = "fds:";
  for (int fd : fds) line += " " + std::to_string(fd);
  std::printf("%s\n", line.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "env") {
    print_env();
    return 0;
  }
  if (mode == "fds") {
    print_fds();
    return 0;
  }
  if (mode == "lines" && argc > 2) {
    print_lines(std::atoi(argv[2]));
    return 0;
  }
  if (mode == "wait") wait_to_be_stopped(argc > 2 && std::string(argv[2]) == "ignore_term");
  if (mode == "say_signal") say_which_signal_stops_it();
  if (mode == "multiline_error") {
    // An error whose first line introduces a list (the plugin loader's "Searched:").
    distcomm::FailureReport report;
    report.unix_time_ns = distcomm::FailureReport::now_ns();
    report.message = "cannot load backend 'x': no usable libdistcomm_x.so. Searched:\n  /a/libdistcomm_x.so: not found";
    std::ofstream(env_str(distcomm::kErrorFileVariable)) << report.encode();
    std::fprintf(stderr, "rank_probe: %s\n", report.message.c_str());  // as run_main prints it
    return 1;
  }
  if (mode == "cascade" && argc > 2) {
    const std::string cause_file = env_str(distcomm::kErrorFileVariable);
    const std::string dir = cause_file.substr(0, cause_file.find_last_of('/') + 1);
    const std::string cause_report = dir + "rank_" + argv[2] + ".error";
    if (env_int("RANK") == std::atoi(argv[2])) {
      ::signal(SIGTERM, SIG_IGN);
      distcomm::FailureReport report;
      report.unix_time_ns = distcomm::FailureReport::now_ns();
      report.message = "the cause";
      std::ofstream(cause_file) << report.encode();
      ::usleep(500000);
      return 5;
    }
    while (::access(cause_report.c_str(), F_OK) != 0) ::usleep(1000);
    return 1;
  }
  if (mode == "adopted" && argc > 2) {
    const std::string own_file = env_str(distcomm::kErrorFileVariable);
    const std::string dir = own_file.substr(0, own_file.find_last_of('/') + 1);
    const std::string cause_report = dir + "rank_" + argv[2] + ".error";
    distcomm::FailureReport report;
    if (env_int("RANK") == std::atoi(argv[2])) {
      report.unix_time_ns = distcomm::FailureReport::now_ns() + 1'000'000'000;
      report.message = "Desync: found by this rank";
      std::ofstream(own_file + ".tmp") << report.encode();
      ::rename((own_file + ".tmp").c_str(), own_file.c_str());
      for (;;) ::pause();
    }
    while (::access(cause_report.c_str(), F_OK) != 0) ::usleep(1000);
    report.unix_time_ns = distcomm::FailureReport::now_ns();
    report.message = "Desync: rank " + std::string(argv[2]) + " found it, which cut this op off";
    report.consequence = true;
    std::ofstream(own_file) << report.encode();
    return 1;
  }
  if (mode == "late_finder" && argc > 2) {
    const std::string own_file = env_str(distcomm::kErrorFileVariable);
    const std::string dir = own_file.substr(0, own_file.find_last_of('/') + 1);
    const std::string published = dir + "published";
    distcomm::FailureReport report;
    if (env_int("RANK") == std::atoi(argv[2])) {
      std::ofstream marker(published);
      marker.close();
      for (int r = 0; r < env_int("WORLD_SIZE"); ++r) {
        const std::string theirs = dir + "rank_" + std::to_string(r) + ".error";
        while (r != env_int("RANK") && ::access(theirs.c_str(), F_OK) != 0) ::usleep(1000);
      }
      ::usleep(300'000);
      report.unix_time_ns = distcomm::FailureReport::now_ns();
      report.message = "Desync: found by this rank";
      std::ofstream(own_file + ".tmp") << report.encode();
      ::rename((own_file + ".tmp").c_str(), own_file.c_str());
      return 1;
    }
    while (::access(published.c_str(), F_OK) != 0) ::usleep(1000);
    report.unix_time_ns = distcomm::FailureReport::now_ns();
    report.message = "Desync: rank " + std::string(argv[2]) + " found it, which cut this op off";
    report.consequence = true;
    std::ofstream(own_file + ".tmp") << report.encode();
    ::rename((own_file + ".tmp").c_str(), own_file.c_str());
    return 1;
  }
  if (mode == "victims" && argc > 3) {
    const int rank = env_int("RANK");
    if (rank != std::atoi(argv[2]) && rank != std::atoi(argv[3])) wait_to_be_stopped(false);
    rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    const std::string pid_file = env_str("TEST_TMPDIR") + "/victim_pid_" + std::to_string(rank);
    std::ofstream(pid_file + ".tmp") << ::getpid();
    ::rename((pid_file + ".tmp").c_str(), pid_file.c_str());
    write_text(1, "victim " + std::to_string(::getpid()) + "\n");
    for (;;) ::pause();
  }
  if (mode == "victim" && argc > 2) {
    const int victim = std::atoi(argv[2]);
    if (env_int("RANK") == victim) {
      if (argc > 3 && std::string(argv[3]) == "exit") ::signal(SIGUSR2, [](int) { ::_exit(3); });
      std::ofstream(ready_file(victim) + ".tmp") << ::getpid();
      ::rename((ready_file(victim) + ".tmp").c_str(), ready_file(victim).c_str());
      std::ofstream(env_str("TEST_TMPDIR") + "/victim_pid.tmp") << ::getpid();
      ::rename((env_str("TEST_TMPDIR") + "/victim_pid.tmp").c_str(), (env_str("TEST_TMPDIR") + "/victim_pid").c_str());
      write_text(1, "victim " + std::to_string(::getpid()) + "\n");
      for (;;) ::pause();
    }
    while (::access(ready_file(victim).c_str(), F_OK) != 0) ::usleep(1000);
    std::string pid;
    std::ifstream(ready_file(victim)) >> pid;
    while (!process_is_dead("/proc/" + pid + "/stat")) ::usleep(1000);
    distcomm::FailureReport report;
    report.unix_time_ns = distcomm::FailureReport::now_ns();
    report.message = "rank " + std::to_string(victim) + " died";
    report.lost_rank = victim;
    std::ofstream(env_str(distcomm::kErrorFileVariable)) << report.encode();
    std::ofstream(env_str("TEST_TMPDIR") + "/reported_" + std::to_string(env_int("RANK"))) << ::getpid();
    return 1;
  }
  if (mode == "replaced" && argc > 3) {
    const int failing = std::atoi(argv[2]);
    const std::string done = env_str("TEST_TMPDIR") + "/replaced_" + std::to_string(failing);
    if (env_str("DISTCOMM_FT_JOIN") == "1") {
      write_text(1, "replacement " + env_str("DISTCOMM_FT_MEMBER_ID") + " RANK=" + env_str("RANK") + "\n");
      const int code = argc > 4 ? std::atoi(argv[4]) : 0;
      if (code == 0) std::ofstream(done) << ::getpid();  // only one that succeeds releases the others
      return code;
    }
    if (env_int("RANK") == failing) return std::atoi(argv[3]);
    for (int i = 0; i < 3000 && ::access(done.c_str(), F_OK) != 0; ++i) ::usleep(1000);
    return 0;
  }
  if ((mode == "fail_first" || mode == "fail_first_then_wait") && argc > 3) {
    if (env_int("DISTCOMM_RESTART_COUNT") > 0) {
      if (mode == "fail_first_then_wait") wait_to_be_stopped(false);
      print_env();
      return 0;
    }
    mode = "fail";
  }
  if ((mode == "fail" || mode == "signal") && argc > 3) {
    if (env_int("RANK") != std::atoi(argv[2])) wait_to_be_stopped(argc > 4 && std::string(argv[4]) == "ignore_term");
    wait_for_the_others_to_be_ready();
    if (mode == "fail") return std::atoi(argv[3]);
    rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::kill(::getpid(), std::atoi(argv[3]));
    ::pause();
  }
  std::fprintf(stderr, "rank_probe: bad arguments\n");
  return 64;
}
