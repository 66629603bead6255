// launch: start N ranks of a program the way torchrun does.
//
//   launch --nproc_per_node=3 -- bazel-bin/examples/all_reduce
//
// Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT;
// its output lines reach the terminal prefixed with "[rank R]". The launcher serves the job's
// store itself (node 0's, in static jobs; not with --serve_store=false), so that it outlives
// any rank. If a rank fails, the
// launcher says which and how, stops the others (or, with --on_failure=continue, lets them
// run on) and exits non-zero, or with --max_restarts=N starts the job again (up to N times);
// Ctrl-C stops the whole job.
#include <gflags/gflags.h>

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/diagnostics/trace_dump.h"
#include "api/process/job_identity.h"
#include "api/process/rank_environment.h"
#include "api/version.h"
#include "launch/elastic_agent.h"
#include "launch/job.h"
#include "launch/job_outcome.h"
#include "launch/launch_options.h"
#include "launch/tcp_job_store.h"
#include "launch/trace_folder.h"
#include "tools/launch/stop_watch.h"
#include "tools/launch/torchrun_flags.h"

DEFINE_string(nproc_per_node, "1", "ranks to start on this machine: a number, or torchrun's cpu (the cores this "
              "launcher may use), gpu (the CUDA devices) or auto (the GPUs if any, else the cores)");
DEFINE_bool(standalone, false, "torchrun's flag for a job on this machine alone, which is what the launcher does "
            "without --nnodes: the ranks meet at a free port on 127.0.0.1, with a fresh identity. Refused with a "
            "flag that places the job elsewhere (--nnodes, --node_rank, --master_addr, --master_port, "
            "--rdzv_endpoint)");
DEFINE_string(nnodes, "1", "machines in the job (each runs its own launcher): N, or MIN:MAX for an elastic job "
              "(needs --rdzv_endpoint)");
DEFINE_int32(node_rank, 0, "this machine's index in [0, nnodes)");
DEFINE_string(master_addr, "127.0.0.1", "host of the job's store (node 0's, whose launcher serves it)");
DEFINE_int32(master_port, 0, "port of the job's store; 0: pick a free one (single machine only)");
DEFINE_string(backend, "", "backend for the program, exported as DISTCOMM_BACKEND (gloo, mpi, nccl...; default: the program's, else auto)");
// Unlike torchrun's --log-dir, which only names the folder (its -r/--redirects or -t/--tee
// send output there), --log_dir moves the output off the terminal by itself: --help says so,
// or `--log_dir=D --ranks_filter=0` looks like a job that prints nothing.
DEFINE_string(log_dir, "", "write each rank's stdout and stderr to <log_dir>/rank_<R>.log instead of the terminal: "
              "without --tee no rank's output is shown, whatever --ranks_filter says (the launcher's own lines "
              "still are). A later job given the same folder overwrites the files; restart n writes to "
              "<log_dir>/attempt_<n>/");
DEFINE_bool(tee, false, "with --log_dir: show the output on the terminal as well (of the ranks --ranks_filter "
            "names); the files still get every rank's");
DEFINE_string(ranks_filter, "", "comma list of global ranks whose output is shown on the terminal, e.g. 0 (default: "
              "all); the others' is not shown (with --log_dir it is in their files). With --log_dir it shows "
              "nothing unless --tee is given");
DEFINE_double(grace_period_s, 5.0, "seconds between the stopping signal (SIGTERM, or the one that stopped the launcher; a stopped rank also gets SIGCONT) and SIGKILL when the job is stopped");
DEFINE_string(trace_dir, "", "ranks dump their flight recorders into this folder (DISTCOMM_TRACE_DIR) on a failure "
              "and at exit; when a rank fails or the job is stopped, the others are asked (SIGUSR1) first");
DEFINE_double(other_machines_wait_s, 30.0, "node 0's launcher of a job across machines, its ranks done: how long "
              "at most it waits for the other machines' launchers to say how their ranks ended, keeping the job's store "
              "for them");
DEFINE_double(dump_wait_s, 5.0, "with --trace_dir: how long the ranks get to write their dumps before they are stopped");
DEFINE_string(rdzv_backend, "", "torchrun's: static (the default; --master_addr/--master_port) or c10d (with "
              "--rdzv_endpoint: an elastic job); the launchers meet through their own store either way");
DEFINE_bool(no_python, false, "torchrun's (--no-python): the program is run as it is, which the launcher always does");
DEFINE_double(monitor_interval, 0.1, "torchrun's: taken for its command lines; the launcher learns of a rank's end at "
              "once (SIGCHLD), not by polling");
DEFINE_string(role, "default", "torchrun's: the ranks' role, exported as ROLE_NAME (ROLE_RANK and ROLE_WORLD_SIZE "
              "are RANK and WORLD_SIZE: one role per job)");
DEFINE_string(start_method, "spawn", "torchrun's (spawn, fork, forkserver: how Python starts workers): taken; every "
              "rank here is a program of its own, started with fork and exec");
DEFINE_string(rdzv_endpoint, "", "elastic job: HOST[:PORT] (default port 29400) of the rendezvous store, which the "
              "launcher on HOST serves; every machine's launcher gives the same (and the same DISTCOMM_STORE_TOKEN "
              "in its environment)");
DEFINE_string(rdzv_id, "none", "elastic job: the job's name; launchers of another job are refused by the store");
DEFINE_double(rdzv_last_call_s, 30.0, "elastic job: once MIN machines have joined a round, how long to wait for more");
DEFINE_double(rdzv_timeout_s, 600.0, "elastic job: how long to try reaching the endpoint, and to wait for MIN machines");
DEFINE_string(local_addr, "", "elastic job: the address other machines reach this one at (default: the one that "
              "routes to the endpoint)");
DEFINE_bool(serve_store, true, "static jobs: node 0's launcher serves the job's store at --master_addr:--master_port, so "
            "that it outlives any rank (DISTCOMM_STORE_SERVED_BY=launcher); false: rank 0 serves it, as programs that "
            "serve their own store there expect (torch's c10d TCPStore, for one)");
DEFINE_string(on_failure, "stop", "when a rank fails: stop (stop the other ranks) or continue (say so in one line and "
              "let them run on; the job still exits with the first failure's code)");
DEFINE_double(replace_after_s, -1, "with --on_failure=continue: this long after a rank fails, start a replacement that "
              "joins the running ranks (DISTCOMM_FT_JOIN=1, DISTCOMM_FT_MEMBER_ID=rank<R>+<n>; ft/manager.h); the job "
              "then succeeds when every rank's last process exits 0. Negative: none");
DEFINE_int32(max_replacements, 3, "with --replace_after_s: how many replacements one rank may have (a program that "
             "fails at once every time must not become a fork loop)");
DEFINE_int32(max_restarts, 0, "when a rank fails, stop the others and start the job again, up to this many times "
             "(each rank sees DISTCOMM_RESTART_COUNT and TORCHELASTIC_RESTART_COUNT); 0: a failure ends the job");
DEFINE_string(timeline, "", "every rank's ops and DDP buckets, merged into this Chrome trace JSON file "
              "(DISTCOMM_TIMELINE; tools/trace timeline FILE --svg OUT draws it)");

namespace {

// The usage in the name the launcher was run as: "launch" under bazel-bin, "distcomm-launch"
// installed (a fixed "launch", and an example under bazel-bin/, were wrong for the latter).
std::string usage(const std::string& program) {
  return "starts N ranks of a program with torchrun's environment variables.\n"
         "usage: " + program + " [flags] -- program [args...]\n"
         "example: " + program + " --nproc_per_node=3 -- ./train --epochs=2";
}

// What a refusal ends with: how to find the right command line.
std::string usage_hint(const std::string& program) {
  return "(usage: " + program + " [flags] -- program [args...]; " + program + " --help lists the flags)";
}

std::string program_name(const char* argv0) {
  const std::string path = argv0 && *argv0 ? argv0 : "launch";
  return path.substr(path.rfind('/') + 1);
}

// The launcher's flags that PET_<FLAG> gave (defaults_from_pet_variables) and the command
// line did not: refusals name the variable, not a flag the user never typed.
std::vector<std::string> g_flags_from_pet;

std::string naming_pet_variables(const std::string& message) {
  return distcomm::launch::name_pet_variables(message, g_flags_from_pet);
}

// Where the program starts in argv: after "--", else at the first argument that is not a
// launcher flag (so that `launch --nproc_per_node=2 prog --its_flag` leaves --its_flag alone).
int command_start(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") return i;
    if (arg.size() < 2 || arg[0] != '-') return i;
    std::string name = arg.substr(arg[1] == '-' ? 2 : 1);
    if (name.find('=') != std::string::npos) continue;
    gflags::CommandLineFlagInfo info;
    // "--flag value": a non-bool flag takes the next argument as its value, unless that is
    // "--" (then the value is missing, which the parse says, rather than taken as "--").
    if (gflags::GetCommandLineFlagInfo(name.c_str(), &info) && info.type != "bool" && i + 1 < argc &&
        std::string(argv[i + 1]) != "--") {
      ++i;
    }
  }
  return argc;
}

// The ranks may start elsewhere (--working_dir): paths they are given are absolute.
std::string absolute(const std::string& path, const std::string& working_dir) {
  if (path.empty() || path[0] == '/') return path;
  if (!working_dir.empty()) return working_dir + "/" + path;
  char cwd[4096];
  return ::getcwd(cwd, sizeof(cwd)) ? std::string(cwd) + "/" + path : path;
}

// The job's identity as this launcher's own caller gave it (tools/launch does not link the
// core, whose environment.cc reads the same two variables for init_process_group).
distcomm::JobIdentity identity_from_environment() {
  const char* run_id = std::getenv(distcomm::kRunIdVariable);
  const char* token = std::getenv(distcomm::kStoreTokenVariable);
  return {run_id ? run_id : "", token ? token : ""};
}

std::chrono::milliseconds ms_of(const std::string& flag, double seconds) {
  return std::chrono::milliseconds(distcomm::launch::seconds_flag(flag, seconds));
}

distcomm::launch::LaunchOptions options_from_flags(std::vector<std::string> command) {
  distcomm::launch::LaunchOptions o;
  o.command = std::move(command);
  o.nproc_per_node = distcomm::launch::parse_nproc_per_node(FLAGS_nproc_per_node);
  o.role = FLAGS_role;
  o.nnodes = distcomm::launch::parse_nnodes(FLAGS_nnodes).first;
  o.node_rank = FLAGS_node_rank;
  o.master_addr = FLAGS_master_addr;
  // "[::1]" as in a URL: the address is what is inside (messages put the brackets back).
  if (o.master_addr.size() > 2 && o.master_addr.front() == '[' && o.master_addr.back() == ']') {
    o.master_addr = o.master_addr.substr(1, o.master_addr.size() - 2);
  }
  o.master_port = FLAGS_master_port;
  o.backend = FLAGS_backend;
  o.rdzv_id = FLAGS_rdzv_id;  // TORCHELASTIC_RUN_ID: torchrun sets it in static jobs too ("none")
  // --standalone without --rdzv_id: torchrun names the run with a fresh uuid, which programs
  // use to keep one run's files apart from the next's; "none" would give every run one name.
  // (PET_RDZV_ID sets the flag's default, so is_default alone does not tell it was not given.)
  if (FLAGS_standalone && gflags::GetCommandLineFlagInfoOrDie("rdzv_id").is_default &&
      std::getenv(distcomm::launch::pet_variable("rdzv_id").c_str()) == nullptr) {
    o.rdzv_id = distcomm::hex_of(distcomm::random_bytes(16));
  }
  // From the environment, never from flags: a command line is visible to every user.
  o.identity = identity_from_environment();
  o.tee = FLAGS_tee;
  o.ranks_filter = distcomm::launch::parse_rank_list(FLAGS_ranks_filter);
  o.max_restarts = FLAGS_max_restarts;
  o.on_failure = distcomm::launch::parse_on_failure(FLAGS_on_failure);
  o.replace_after = std::chrono::milliseconds(
      distcomm::launch::seconds_flag("replace_after_s", FLAGS_replace_after_s, /*minus_one_is_off=*/true));
  o.max_replacements = FLAGS_max_replacements;
  o.grace_period = ms_of("grace_period_s", FLAGS_grace_period_s);
  o.other_machines_wait = ms_of("other_machines_wait_s", FLAGS_other_machines_wait_s);
  // Under `bazel run` this process starts in its runfiles; relative paths the user typed
  // (bazel-bin/examples/all_reduce) mean the folder bazel was run from.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY")) o.working_dir = dir;
  o.log_dir = absolute(FLAGS_log_dir, o.working_dir);
  o.trace_dir = absolute(FLAGS_trace_dir, o.working_dir);
  if (const char* inherited = std::getenv(distcomm::kTraceDirVariable)) {
    o.inherited_trace_dir = absolute(inherited, o.working_dir);
  }
  o.dump_wait = ms_of("dump_wait_s", FLAGS_dump_wait_s);
  o.dump_wait_given = !gflags::GetCommandLineFlagInfoOrDie("dump_wait_s").is_default;
  o.timeline = absolute(FLAGS_timeline, o.working_dir);
  return o;
}

// --help lists the launcher's own flags, not those of every library linked in (gflags'
// --help would), and --version prints distcomm's. Only the launcher's part of the command
// line counts: `launch -- prog --help` asks the program.

// --standalone asks for what the launcher does by default; it is taken so that torchrun's
// commands run as they are. A flag that places the job elsewhere contradicts it: which of
// the two the user meant cannot be guessed.
void check_standalone() {
  if (!FLAGS_standalone) return;
  for (const char* name : {"nnodes", "node_rank", "master_addr", "master_port", "rdzv_endpoint"}) {
    gflags::CommandLineFlagInfo flag;
    // torchrun's own examples pair it with --nnodes=1 (or 1:1): this machine alone too.
    if (std::string(name) == "nnodes" && (FLAGS_nnodes == "1" || FLAGS_nnodes == "1:1")) continue;
    if (gflags::GetCommandLineFlagInfo(name, &flag) && flag.current_value != flag.default_value) {
      throw std::invalid_argument("--standalone runs the job on this machine alone, at a free port on 127.0.0.1; --" +
                                  flag.name + "=" + flag.current_value + " places it elsewhere: drop one of the two");
    }
  }
}

// The elastic options, when the flags ask for an elastic job (--rdzv_endpoint); a range of
// machines without an endpoint is refused.
std::optional<distcomm::launch::ElasticOptions> elastic_from_flags() {
  distcomm::launch::check_rdzv_backend(FLAGS_rdzv_backend, FLAGS_rdzv_endpoint, FLAGS_standalone);
  const auto [min, max] = distcomm::launch::parse_nnodes(FLAGS_nnodes);
  if (FLAGS_rdzv_endpoint.empty()) {
    if (min != max) {
      throw std::invalid_argument("--nnodes=" + FLAGS_nnodes + ": a range of machines is an elastic job: give every "
                                  "launcher the same --rdzv_endpoint=HOST:PORT");
    }
    return std::nullopt;
  }
  distcomm::launch::ElasticOptions e;
  e.min_nodes = min;
  e.max_nodes = max;
  distcomm::launch::parse_endpoint(FLAGS_rdzv_endpoint, &e);
  e.rdzv_id = FLAGS_rdzv_id;
  e.last_call = ms_of("rdzv_last_call_s", FLAGS_rdzv_last_call_s);
  e.timeout = ms_of("rdzv_timeout_s", FLAGS_rdzv_timeout_s);
  e.local_addr = FLAGS_local_addr;
  return e;
}

// torchrun reads each flag from PET_<FLAG> where the command line does not give it (as
// Kubeflow's PyTorchJob passes them): the same here, before the command line is parsed, so
// that the command line still wins.
void defaults_from_pet_variables() {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  for (const auto& f : flags) {
    if (f.filename != __FILE__) continue;
    const std::string variable = distcomm::launch::pet_variable(f.name);
    const char* value = std::getenv(variable.c_str());
    if (value == nullptr) continue;
    if (gflags::SetCommandLineOptionWithMode(f.name.c_str(), value, gflags::SET_FLAGS_DEFAULT).empty()) {
      throw std::invalid_argument(variable + "=" + value + ": not a valid value for --" + f.name);
    }
    g_flags_from_pet.push_back(f.name);
  }
}

// Once the command line is parsed: the flags it gave are its own, whatever PET_<FLAG> says.
void drop_flags_the_command_line_gave() {
  std::vector<std::string> kept;
  for (const std::string& name : g_flags_from_pet) {
    if (gflags::GetCommandLineFlagInfoOrDie(name.c_str()).is_default) kept.push_back(name);
  }
  g_flags_from_pet.swap(kept);
}

// gflags ends the process on an unknown flag with its own line and status 1 (a failed
// rank's): the launcher's flags are checked first, and one of torchrun's that only makes
// sense for Python says what to do instead.
bool is_bool_word(std::string v) {
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* word : {"1", "t", "true", "y", "yes", "0", "f", "false", "n", "no"}) {
    if (v == word) return true;
  }
  return false;
}

// A value gflags would refuse with its own line and status 1 ("illegal value 'abc' specified
// for double flag"): refused here, as every other bad value is, naming the flag.
void check_flag_value(const gflags::CommandLineFlagInfo& info, const std::string& typed, const std::string& value) {
  if (info.type == "bool") {
    if (is_bool_word(value)) return;
    if (info.name == "tee") {
      throw std::invalid_argument(typed + "=" + value + ": " + distcomm::launch::tee_hint(typed));
    }
    throw std::invalid_argument(typed + "=" + value + ": expected true or false (or " + typed + " alone)");
  }
  const bool floating = info.type == "double";
  const bool integer = info.type == "int32" || info.type == "int64" || info.type == "uint32" || info.type == "uint64";
  if (!floating && !integer) return;
  char* end = nullptr;
  errno = 0;
  if (floating) {
    std::strtod(value.c_str(), &end);
  } else if (info.type[0] == 'u') {
    std::strtoull(value.c_str(), &end, 10);
  } else {
    std::strtoll(value.c_str(), &end, 10);
  }
  const bool ok = !value.empty() && end != nullptr && *end == '\0' && errno == 0 &&
                  !std::isspace(static_cast<unsigned char>(value[0])) && (info.type[0] != 'u' || value[0] != '-');
  if (ok) return;
  const bool seconds = info.name.size() > 2 && info.name.compare(info.name.size() - 2, 2, "_s") == 0;
  throw std::invalid_argument(typed + "=" + value + ": expected " +
                              (floating ? std::string(seconds ? "a number of seconds, e.g. 5 or 0.5" : "a number, e.g. 0.1")
                                        : std::string("a whole number")));
}

void check_flag_names(int flag_argc, int argc, char** argv) {
  for (int i = 1; i < flag_argc; ++i) {
    const std::string arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') continue;
    std::string name = arg.substr(arg[1] == '-' ? 2 : 1);
    name = name.substr(0, name.find('='));
    std::string underscored = name;
    for (char& c : underscored) c = c == '-' ? '_' : c;
    gflags::CommandLineFlagInfo info;
    if (gflags::GetCommandLineFlagInfo(underscored.c_str(), &info)) {
      const std::string typed = arg.substr(0, arg.find('='));
      const size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        check_flag_value(info, typed, arg.substr(eq + 1));
        continue;
      }
      if (info.type == "bool") {
        // torchrun's `--tee 3 prog`: the switch here would take 3 for the program.
        if (info.name == "tee" && i + 1 == flag_argc && flag_argc < argc &&
            distcomm::launch::looks_like_torchrun_tee_value(argv[flag_argc])) {
          throw std::invalid_argument(typed + " " + argv[flag_argc] + ": " + distcomm::launch::tee_hint(typed));
        }
        continue;
      }
      // "--flag value": skip the value; none (or "--", where the program starts) is an error.
      if (++i >= flag_argc) throw std::invalid_argument(arg + " needs a value: " + arg + "=VALUE");
      check_flag_value(info, typed, argv[i]);
      continue;
    }
    // --noflag for a bool flag is gflags' "false".
    if (underscored.rfind("no", 0) == 0 && gflags::GetCommandLineFlagInfo(underscored.substr(2).c_str(), &info) &&
        info.type == "bool") {
      continue;
    }
    const std::string typed = arg.substr(0, arg.find('='));
    const std::string hint = distcomm::launch::torchrun_only_flag_hint(typed);
    throw std::invalid_argument("unknown flag " + typed + (hint.empty() ? "" : ": " + hint));
  }
}

bool print_help_or_version(int flag_argc, char** argv) {
  for (int i = 1; i < flag_argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--version" || arg == "-version") {
      std::cout << "launch (distcomm) " << DISTCOMM_VERSION << "\n";
      return true;
    }
    if (arg == "--help" || arg == "-help" || arg == "-h") {
      std::cout << program_name(argv[0]) << ": " << usage(program_name(argv[0])) << "\n\nflags:\n";
      std::vector<gflags::CommandLineFlagInfo> flags;
      gflags::GetAllFlags(&flags);
      for (const auto& f : flags) {
        if (f.filename != __FILE__) continue;
        std::cout << "  --" << f.name << "=" << (f.type == "string" ? "\"" + f.default_value + "\"" : f.default_value)
                  << "\n      " << f.description << "\n";
      }
      std::cout << "  --version\n      print distcomm's version and exit\n";
      return true;
    }
  }
  return false;
}

// When the job failed during or soon after a stop of this launcher (stop_watch.h), its last
// line names the stop before the first failure seen: that rank only exited first.
void say_launcher_stop(const distcomm::launch::JobResult& result, const std::string& tag,
                       distcomm::launch::StoreRole role) {
  if (result.exit_code == 0 || result.interrupted_by != 0 || result.failure.empty()) return;
  // stop_began: when the first failure was seen; with --on_failure=continue (the ranks run
  // on) it is not set, and the job's end stands for it.
  const auto seen = result.stop_began != std::chrono::steady_clock::time_point()
                        ? result.stop_began
                        : std::chrono::steady_clock::now();
  const std::optional<distcomm::launch::LauncherStop> stop = distcomm::launch::stop_before(seen);
  if (!stop) return;
  std::cerr << tag << ": the job failed after " << distcomm::launch::stop_text(*stop, role)
            << "; the first failure seen after: " << result.failure << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  const auto began = std::chrono::steady_clock::now();
  const std::string program = program_name(argv[0]);
  gflags::SetUsageMessage(usage(program));
  int start = command_start(argc, argv);
  std::vector<std::string> command(argv + start + (start < argc && std::string(argv[start]) == "--"), argv + argc);
  int flag_argc = start;
  if (print_help_or_version(flag_argc, argv)) return 0;
  try {
    check_flag_names(flag_argc, argc, argv);
    defaults_from_pet_variables();
  } catch (const std::invalid_argument& e) {
    std::cerr << "launch: " << e.what() << "\n" << usage_hint(program) << "\n";
    return 2;
  }
  gflags::ParseCommandLineFlags(&flag_argc, &argv, /*remove_flags=*/true);
  drop_flags_the_command_line_gave();
  if (flag_argc > 1) {
    std::cerr << "launch: unexpected argument '" << argv[1] << "' among the launcher's flags\n";
    return 2;
  }
  try {
    check_standalone();
    distcomm::launch::LaunchOptions options = options_from_flags(std::move(command));
    const std::optional<distcomm::launch::ElasticOptions> elastic = elastic_from_flags();
    if (!elastic && FLAGS_serve_store) {
      // The launcher serves the job's store (launch/job_store.h), listening where rank 0
      // would; elastic rounds keep rank 0 serving theirs, and so does a program that is not
      // distcomm's and serves its own store at MASTER_PORT (--serve_store=false).
      options.serve_store = distcomm::launch::serve_tcp_job_store;
      const char* bind = std::getenv(distcomm::local::kStoreBindVariable);
      options.store_bind = bind ? bind : "";
    }
    // The trace folder with its parents, before anything starts: a folder that cannot be
    // made is refused now, not found out from every rank's lost dump once the job failed.
    if (!options.trace_dir.empty()) distcomm::launch::create_trace_folder(options.trace_dir);
    // A launcher that was stopped (SIGSTOP) or frozen answered nothing meanwhile, its store
    // included: the ranks' failures that follow are its, not the first rank's to exit. Only
    // node 0's launcher serves the store: serve_store is set on every machine's.
    const distcomm::launch::StoreRole role =
        distcomm::launch::store_role(static_cast<bool>(options.serve_store), options.node_rank);
    distcomm::launch::start_stop_watch(options.tag, role);
    const distcomm::launch::JobResult result =
        elastic ? distcomm::launch::run_elastic_job(options, *elastic) : distcomm::launch::run_job(options);
    say_launcher_stop(result, options.tag, role);
    // Ranks that exited 0 here: the last line says so, and that the job succeeded only where
    // this launcher knows it (job_outcome.h). A failure's last line is the failure, said
    // where it was found.
    const std::string clean = distcomm::launch::clean_exit_line(result, std::chrono::steady_clock::now() - began);
    if (!clean.empty()) std::cerr << options.tag << ": " << clean << std::endl;
    return result.exit_code;
  } catch (const std::invalid_argument& e) {
    std::cerr << "launch: " << naming_pet_variables(e.what()) << "\n" << usage_hint(program) << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "launch: cannot start the job: " << naming_pet_variables(e.what()) << "\n";
    return 1;
  }
}
