// How the process's MPI starts and ends (mpi_runtime.h, "Start" and "Exit"): MPI_Init on
// the MPI thread, waited for within the first group's creation deadline; at exit, the
// drain and MPI_Finalize, or an end without it when MPI cannot finalize.
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/process/thread_start.h"
#include "backends/mpi/mpi_runtime.h"
#include "backends/mpi/mpi_types.h"

namespace distcomm {
namespace mpi {
namespace {

// At exit, how long MPI_Finalize may wait for peers when a failed group left operations
// MPI still holds (a peer that never joined them may be stuck, and never finalize).
constexpr auto kFinalizeGrace = std::chrono::seconds(5);
// At an exit with an error status, how long the drain and MPI_Finalize may take. The peers
// may sit in an op this process will never join (it failed before joining), and Open
// MPI's MPI_Finalize waits for every rank: they would come only at that op's timeout. The
// job fails anyway (mpirun ends it when a process exits with an error, finalized or not),
// so this only lets ranks that all end at once finalize cleanly (milliseconds), and keeps
// the job's end within seconds of the error.
constexpr auto kErrorExitGrace = std::chrono::seconds(2);

std::mutex g_start_mu;
// Never deleted: static destructors that run after exit (a default group being
// destroyed) may still reach it, and must find it finalised rather than gone.
Runtime* g_runtime = nullptr;

// Whether this host runs more ranks than this process may use cores: then a polling thread
// must yield, or it would hold a core a peer needs to make progress (Open MPI's own rule
// for its blocking calls).
bool host_is_oversubscribed(int local_ranks) {
  cpu_set_t cpus;
  const int cores = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  return local_ranks > cores;
}

// Open MPI's nonblocking all_reduce (libnbc) picks a binomial tree -- a reduce to one rank
// and a broadcast back -- for any call in place or any group under 4 ranks, and the
// plugin's all_reduces are always in place: they ran 2-3x slower than MPI_Allreduce from
// 256 KiB to 2 MiB (docs/backends.md, "MPI"). Reduce-scatter + allgather (algorithm 3) kept up with it.
// libnbc reads the setting at every call, so it is set through the MPI tool interface
// after MPI_Init -- unless it is not 0 any more: then the user chose (OMPI_MCA_..., --mca).
// thread_level: what MPI_Init_thread gave. Open MPI 4.1's MPI_T_init_thread overwrites the
// level MPI_Query_thread reports with the one it is asked for, so it asks for that one.
void choose_iallreduce_algorithm(int algorithm, int thread_level) {
#if defined(OPEN_MPI)
  int provided = 0, index = -1, count = 0;
  MPI_T_cvar_handle handle;
  if (algorithm <= 0 || MPI_T_init_thread(thread_level, &provided) != MPI_SUCCESS) return;
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
    int current = -1;
    if (MPI_T_cvar_read(handle, &current) == MPI_SUCCESS && current == 0) MPI_T_cvar_write(handle, &algorithm);
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
#else
  (void)algorithm;
  (void)thread_level;
#endif
}

// Ends the process now, without MPI_Finalize (which cannot work, or would wait for a peer
// that never comes), saying why on stderr in one line. status: the program's exit status.
[[noreturn]] void exit_without_finalize(int status, const std::string& why) {
  std::fprintf(stderr,
               "distcomm: mpi backend: exiting without MPI_Finalize: %s; mpirun may report that this process did not "
               "finalize, and end the job\n",
               why.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(status);
}

}  // namespace

Runtime* Runtime::started() {
  std::lock_guard<std::mutex> start_lock(g_start_mu);
  return g_runtime;
}

Runtime& Runtime::start(const MpiConfig& config, const InitWait& wait) {
  Runtime* rt = nullptr;
  {
    std::lock_guard<std::mutex> start_lock(g_start_mu);
    if (!g_runtime) {
      g_runtime = new Runtime();
      g_runtime->config_ = config;
      g_runtime->waiters_drive_ = config.waiters_drive;
      int initialized = 0;
      MPI_Initialized(&initialized);
      g_runtime->program_initialized_mpi_ = initialized != 0;
      try {
        g_runtime->thread_ = start_thread("the mpi backend's MPI thread", [] { g_runtime->thread_main(); });
      } catch (...) {
        // Failed as a start of MPI fails: this creation and every later one say why.
        std::lock_guard<std::mutex> lock(g_runtime->mu_);
        g_runtime->start_error_ = std::current_exception();
        g_runtime->state_ = State::kFailed;
      }
    }
    rt = g_runtime;
  }
  // Not under g_start_mu: a second group created meanwhile waits within its own deadline.
  rt->wait_started(wait);
  std::lock_guard<std::mutex> lock(rt->mu_);
  switch (rt->state_) {
    case State::kRunning:
      return *rt;
    case State::kFailed:
      std::rethrow_exception(rt->start_error_);
    default:
      throw BackendUnavailable(
          "mpi backend: MPI was finalized at exit in this process and cannot be initialized again");
  }
}

void Runtime::wait_started(const InitWait& wait) {
  std::unique_lock<std::mutex> lock(mu_);
  auto started = [this] { return state_ != State::kStarting; };
  if (started()) return;
  const std::string what =
      program_initialized_mpi_
          ? "of the MPI job to start distcomm's MPI runtime (it duplicates MPI_COMM_WORLD, which waits for all of "
            "them and cannot say which)"
          : "of the mpirun job to start MPI (Open MPI's MPI_Init waits for all of them and cannot say which)";
  try {
    wait.until(
        what, [&](std::chrono::milliseconds slice) { return done_cv_.wait_for(lock, slice, started); },
        [] { return std::vector<int>{}; },
        "they have not called init_process_group yet, or are stuck or gone (all of them: mpirun starts every "
        "process of the job)");
  } catch (...) {
    // A Timeout, or another rank's failed creation seen meanwhile (init_wait.h): either way
    // the MPI thread stays inside MPI_Init: should the process exit before it returns, it
    // must end without finalizing. Registered now, after whatever handlers MPI_Init has
    // registered so far, so that it runs before them.
    if (!started()) {
      static std::once_flag registered;
      std::call_once(registered, [] { on_exit([](int status, void*) { g_runtime->exit_while_starting(status); }, nullptr); });
    }
    throw;
  }
}

void Runtime::exit_while_starting(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  // Started after all: the ordinary handler, registered after MPI_Init (so run before
  // this one), has finalized.
  if (state_ != State::kStarting) return;
  exit_without_finalize(status, std::string(program_initialized_mpi_ ? "distcomm's start of MPI (duplicating "
                                                                      "MPI_COMM_WORLD)"
                                                                    : "MPI_Init") +
                                    " never finished (init gave up waiting for the other ranks of the job to start MPI: its "
                                    "timeout, or a rank's failed creation), and a process cannot finalize while a "
                                    "thread is inside MPI");
}

void Runtime::thread_main() {
  try {
    initialize();
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    start_error_ = std::current_exception();
    state_ = State::kFailed;
    done_cv_.notify_all();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = State::kRunning;
  }
  done_cv_.notify_all();
  serve();
  close();
}

void Runtime::initialize() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) {
    throw BackendUnavailable("mpi backend: MPI was already finalized in this process; it cannot be "
                             "initialized again");
  }
  if (initialized) {
    MPI_Query_thread(&thread_level_);
    if (thread_level_ < MPI_THREAD_MULTIPLE) {
      throw BackendUnavailable(
          std::string("mpi backend: the program initialized MPI with ") + thread_level_name(thread_level_) +
          ", but the backend calls MPI from its own thread and needs MPI_THREAD_MULTIPLE: call "
          "MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided), or leave initializing MPI "
          "to distcomm");
    }
  } else {
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &thread_level_);
    if (rc != MPI_SUCCESS) {
      throw BackendUnavailable("mpi backend: MPI_Init_thread failed: " + error_string(rc));
    }
    owns_mpi_ = true;
    // Known only now; FUNNELED is all this thread needs to make every call itself.
    if (thread_level_ < MPI_THREAD_FUNNELED) {
      throw BackendUnavailable(std::string("mpi backend: the MPI library gives only ") +
                               thread_level_name(thread_level_) +
                               "; the backend needs at least MPI_THREAD_FUNNELED");
    }
    choose_iallreduce_algorithm(config_.iallreduce_algorithm, thread_level_);
    // Registered after MPI_Init, so it runs before the handlers MPI registered itself.
    // on_exit, not atexit: a process that cannot finalize ends with the program's status.
    on_exit([](int status, void*) { g_runtime->stop_at_exit(status); }, nullptr);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  int* tag_ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
  if (found && tag_ub) tag_upper_bound_ = *tag_ub;
  const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &arrival_comm_);
  if (rc != MPI_SUCCESS) {
    throw BackendUnavailable("mpi backend: duplicating MPI_COMM_WORLD for group creation failed: " + error_string(rc));
  }
  MPI_Comm_set_errhandler(arrival_comm_, MPI_ERRORS_RETURN);
  register_reduced_float_types();
  yield_when_idle_ = host_is_oversubscribed(config_.local_ranks);
  waiters_drive_ = waiters_drive_ && thread_level_ == MPI_THREAD_MULTIPLE;
}

void Runtime::stop_at_exit(int status) {
  if (in_round() || std::this_thread::get_id() == thread_.get_id()) return;  // exit() from a callback
  if (stuck_setups_.load() > 0) {
    exit_without_finalize(status, "creating a group's communicator never finished (a member gave up at its deadline, "
                                  "or is stuck or gone), and a process cannot finalize while a thread is inside MPI");
  }
  exit_status_.store(status);
  exiting_.store(true);
  wake();
  if (!thread_.joinable()) return;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const auto finalized = [this] { return state_ == State::kFinalized; };
    if (status != 0) {
      if (!done_cv_.wait_for(lock, kErrorExitGrace, finalized)) {
        lock.unlock();
        exit_without_finalize(status, "the program is ending with an error (exit status " + std::to_string(status) +
                                          "), and draining its ops and MPI_Finalize waited " +
                                          std::to_string(kErrorExitGrace.count()) +
                                          " s for the other ranks, which may sit in an op this process never joined");
      }
    } else {
      // Queued and running ops get 2 s to end (the MPI thread's drain, kExitDrainGrace), then
      // are given up, saying so; so this wait ends within that and close()'s own MPI calls.
      done_cv_.wait(lock, [this] { return state_ == State::kFinalized || finalize_may_hang_; });
      if (!done_cv_.wait_for(lock, kFinalizeGrace, finalized)) {
        lock.unlock();
        exit_without_finalize(status, "a failed group left operations that a peer never joined, and MPI_Finalize "
                                      "waited " + std::to_string(kFinalizeGrace.count()) + " s for " +
                                      finalize_waits_for_ + " (stuck or gone)");
      }
    }
  }
  thread_.join();
}

}  // namespace mpi
}  // namespace distcomm
