#include "api/run_main.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "api/errors.h"
#include "api/plugin/plugin_registry.h"
#include "api/process/failure_origin.h"
#include "api/process/failure_report.h"
#include "api/process/local_processes.h"
#include "api/process_group.h"
#include "api/process/program_rank.h"
#include "api/process/write_fully.h"

namespace distcomm {
namespace {

// Set once by run_main, read by the terminate handler.
std::string* g_program = nullptr;
std::string* g_error_file = nullptr;

// One write, so that the line never interleaves with another rank's on a shared terminal.
void say(const std::string& program, const std::string& message) {
  std::fflush(stdout);
  write_fully(STDERR_FILENO, program + ": " + message + "\n");
}

void leave_report(const std::string& text) {
  if (!g_error_file || g_error_file->empty()) return;
  FailureReport report;
  report.unix_time_ns = FailureReport::now_ns();
  report.message = text;
  report.consequence = latest_group_failure_was_adopted();
  report.lost_rank = latest_group_failure_lost_rank();
  std::ofstream f(*g_error_file, std::ios::binary | std::ios::trunc);
  f << report.encode();
}

// What ended the program through std::terminate. Where the loader is inside dlopen of a
// plugin on this thread, it was that plugin's static initialisation (nothing can catch
// there); otherwise an exception nobody caught, on a thread it cannot tell (main's too: a
// noexcept function, a destructor), so it claims none.
std::string terminate_text(const std::exception_ptr& e) {
  if (!e) return "std::terminate was called without an exception";
  const std::string plugin = plugin_being_loaded();
  if (!plugin.empty()) {
    return "loading plugin " + plugin + " threw " + type_and_message(e) +
           " from its static initialisers (inside dlopen, where C++ allows no catching it): fix or remove the plugin";
  }
  return "an exception was not caught (std::terminate): " + type_and_message(e);
}

[[noreturn]] void on_terminate() {
  const std::string what = terminate_text(std::current_exception());
  leave_report(what);
  say(g_program ? *g_program : "distcomm", what);
  std::fflush(nullptr);
  ::_exit(1);
}

}  // namespace

std::string type_and_message(std::exception_ptr e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (...) {
    return local::describe_current_exception();
  }
}

int run_main(const std::string& program, const std::function<int()>& body) {
  if (!g_program) {
    g_program = new std::string(program);
    // Read here, at the program's edge (main calls run_main), not in environment.cc: the
    // report is written as the program ends, whatever state the library is in then, and
    // this file is the only one that writes it (environment.h names this exception).
    const char* file = std::getenv(kErrorFileVariable);
    g_error_file = new std::string(file ? file : "");
    std::set_terminate(on_terminate);
  }
  try {
    return body();
  } catch (...) {
    const std::exception_ptr e = std::current_exception();
    leave_report(type_and_message(e));
    // Led by this process's rank where nothing else says which rank the line is from (under
    // mpirun, srun, by hand: no distcomm launcher, which names the failed rank itself), unless
    // the message names it already (the groups' own errors do).
    say(program, g_error_file->empty() ? with_program_rank(message_of(e)) : message_of(e));
    // Before main returns and the exit closes this process's connections (and the store,
    // on rank 0): the peers then report this error, not a connection this rank closed.
    ProcessGroup::publish_program_failure(e);
    return 1;
  }
}

}  // namespace distcomm
