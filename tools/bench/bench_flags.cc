#include "tools/bench/bench_flags.h"

#include <cctype>
#include <functional>
#include <limits>

#include "api/errors.h"
#include "tools/bench/result_check.h"

namespace distcomm {
namespace bench {
namespace {

int64_t parse_integer(const std::string& text, const std::string& flag, int64_t min_value,
                      int64_t max_value = std::numeric_limits<int>::max()) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size()) {
    throw InvalidArgument(flag + " expects an integer, got '" + text + "'");
  }
  if (value < min_value || value > max_value) {
    throw InvalidArgument(flag + " must be between " + std::to_string(min_value) + " and " +
                          std::to_string(max_value) + ", got " + text);
  }
  return value;
}

bool parse_bool(const std::string& text, const std::string& flag) {
  if (text == "1" || text == "true") return true;
  if (text == "0" || text == "false") return false;
  throw InvalidArgument(flag + " expects 0/1/true/false, got '" + text + "'");
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string::npos ? text.size() : comma;
    if (end > start) parts.push_back(text.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

// One flag: its short letter (0 if none), long name, and what to do with its value.
// Switches (takes_value false) get "1" unless written --name=VALUE.
struct FlagSpec {
  char letter;
  const char* name;
  bool takes_value;
  std::function<void(BenchFlags&, const std::string& flag, const std::string& value)> apply;
  // A switch whose value may follow as the next argument (-a 3), or be left out (-a: 1).
  bool value_may_follow = false;
};

// nccl-tests' -a N: how the ranks' loop times are combined.
RankTime parse_rank_time(const std::string& text, const std::string& flag) {
  if (text.size() == 1 && text[0] >= '0' && text[0] <= '3') return static_cast<RankTime>(text[0] - '0');
  throw InvalidArgument(flag + " expects nccl-tests' 0 (rank 0's time), 1 (the average of the ranks'), 2 (the "
                        "fastest rank's) or 3 (the slowest rank's), got '" + text + "'");
}

const std::vector<FlagSpec>& flag_specs() {
  using F = BenchFlags;
  using S = const std::string&;
  static const std::vector<FlagSpec> specs = {
      {0, "op", true, [](F& f, S, S v) { f.op = parse_bench_op(v); }},
      {0, "backend", true, [](F& f, S, S v) { f.backend = v; }},
      {0, "config", true, [](F& f, S n, S v) {
         for (const std::string& pair : split_commas(v)) {
           const size_t eq = pair.find('=');
           if (eq == 0 || eq == std::string::npos) {
             throw InvalidArgument(n + " expects key=value pairs separated by commas, got '" + pair + "'");
           }
           f.backend_config[pair.substr(0, eq)] = pair.substr(eq + 1);
         }
       }},
      {'b', "minbytes", true, [](F& f, S n, S v) { f.min_bytes = parse_size(v, n); }},
      {'e', "maxbytes", true, [](F& f, S n, S v) { f.max_bytes = parse_size(v, n); }},
      {'i', "stepbytes", true, [](F& f, S n, S v) { f.step_bytes = parse_size(v, n); }},
      {'f', "stepfactor", true, [](F& f, S n, S v) { f.step_factor = parse_integer(v, n, 1); }},
      {'n', "iters", true, [](F& f, S n, S v) { f.iters = parse_integer(v, n, 1); }},
      {0, "large_iters", true, [](F& f, S n, S v) { f.large_iters = parse_integer(v, n, 1); }},
      {0, "sizes", true, [](F& f, S n, S v) {
         f.sizes.clear();
         for (const std::string& s : split_commas(v)) f.sizes.push_back(parse_size(s, n));
         if (f.sizes.empty()) throw InvalidArgument(n + " needs at least one size");
       }},
      {'w', "warmup_iters", true, [](F& f, S n, S v) { f.warmup_iters = parse_integer(v, n, 0); }},
      {'c', "check", true, [](F& f, S n, S v) { f.check_iters = parse_integer(v, n, 0); }},
      {'d', "datatype", true, [](F& f, S, S v) { f.dtype = parse_dtype(v); }},
      {'o', "redop", true, [](F& f, S, S v) { f.redop = parse_reduce_op(v); }},
      {'r', "root", true, [](F& f, S n, S v) { f.root = parse_integer(v, n, 0); }},
      {'a', "average", false, [](F& f, S n, S v) { f.rank_time = parse_rank_time(v, n); }, true},
      {0, "device", true, [](F& f, S n, S v) {
         if (v != "auto" && v != "cpu" && v != "cuda") {
           throw InvalidArgument(n + " takes auto, cpu or cuda, not '" + v + "'");
         }
         f.device = v;
       }},
      {0, "nproc", true, [](F& f, S n, S v) { f.nproc = parse_integer(v, n, 1, 1024); }},
      {0, "timeout", true, [](F& f, S n, S v) { f.timeout_s = parse_integer(v, n, 1); }},
      {0, "data_varying", false, [](F& f, S n, S v) { f.data_varying = parse_bool(v, n); }},
      {0, "json", true, [](F& f, S, S v) { f.json_path = v; }},
      {0, "plot", true, [](F& f, S, S v) { f.plot_path = v; }},
      {0, "plot_inputs", true, [](F& f, S, S v) { f.plot_inputs = split_commas(v); }},
      {0, "corrupt_for_test", false, [](F& f, S n, S v) { f.corrupt_for_test = parse_bool(v, n); }},
      {'h', "help", false, [](F& f, S n, S v) { f.help = parse_bool(v, n); }},
      {0, "version", false, [](F& f, S n, S v) { f.version = parse_bool(v, n); }},
  };
  return specs;
}

const FlagSpec* find_long(const std::string& name) {
  for (const FlagSpec& s : flag_specs()) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

const FlagSpec* find_short(char letter) {
  for (const FlagSpec& s : flag_specs()) {
    if (s.letter == letter) return &s;
  }
  return nullptr;
}

void check_consistency(const BenchFlags& f, bool factor_given, bool step_given) {
  if (f.help || f.version) return;
  if (factor_given && step_given) {
    throw InvalidArgument("give -f (step factor) or -i (step bytes), not both");
  }
  if (f.min_bytes > f.max_bytes) {
    throw InvalidArgument("-b (" + std::to_string(f.min_bytes) + " bytes) is larger than -e (" +
                          std::to_string(f.max_bytes) + " bytes)");
  }
  if (f.step_factor > 1 && f.min_bytes == 0) {
    throw InvalidArgument("-b 0 with -f never grows: start the sweep at 1 byte or more");
  }
  if (f.step_factor <= 1 && f.step_bytes <= 0 && f.min_bytes != f.max_bytes) {
    throw InvalidArgument("-i must be at least 1 byte to step from -b to -e");
  }
  if (op_reduces(f.op)) check_reduce_supported(f.redop, f.dtype);
  if (f.corrupt_for_test && f.check_iters == 0) {
    throw InvalidArgument("--corrupt_for_test needs -c 1 or more: nothing is checked with -c 0");
  }
  if (!f.plot_inputs.empty() && f.plot_path.empty()) {
    throw InvalidArgument("--plot_inputs needs --plot=FILE.svg to say where the picture goes");
  }
  // Known before any rank starts: refused here, as a bad flag, rather than by every rank.
  if (f.nproc > 0) {
    check_root(f, f.nproc, "--nproc=" + std::to_string(f.nproc));
    check_checkable(f, f.nproc, "--nproc=" + std::to_string(f.nproc));
  }
  size_sweep(f);  // a sweep of too many sizes
}

}  // namespace

int64_t parse_size(const std::string& text, const std::string& flag) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  int64_t unit = 1;
  const std::string suffix = text.substr(digits);
  if (suffix == "K" || suffix == "k") unit = int64_t{1} << 10;
  else if (suffix == "M" || suffix == "m") unit = int64_t{1} << 20;
  else if (suffix == "G" || suffix == "g") unit = int64_t{1} << 30;
  else if (!suffix.empty()) digits = 0;  // anything else is malformed
  if (digits == 0 || digits > 12) {
    throw InvalidArgument(flag + " expects a byte count like 8, 64K, 1M or 2G, got '" + text + "'");
  }
  // 12 digits of G would overflow int64 (a negative size passed the -b <= -e check and the
  // sweep grew to trillions of sizes); no host has a petabyte to send.
  const int64_t count = std::stoll(text.substr(0, digits));
  if (count > kMaxBenchBytes / unit) {
    throw InvalidArgument(flag + " " + text + " is more than 1 PiB (2^50 bytes), the largest size bench takes");
  }
  return count * unit;
}

BenchFlags parse_bench_flags(const std::vector<std::string>& args) {
  BenchFlags flags;
  bool factor_given = false;
  bool step_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const FlagSpec* spec = nullptr;
    std::string value;
    bool has_value = false;
    std::string shown;  // how the flag is named in errors
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      const size_t eq = arg.find('=');
      const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      spec = find_long(name);
      shown = "--" + name;
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        has_value = true;
      }
    } else if (arg.size() >= 2 && arg[0] == '-' && std::isalpha(static_cast<unsigned char>(arg[1]))) {
      spec = find_short(arg[1]);
      shown = arg.substr(0, 2);
      if (arg.size() > 2) {  // -b8
        value = arg.substr(2);
        has_value = true;
      }
    }
    if (spec == nullptr) {
      throw InvalidArgument("unknown argument '" + arg + "' (see --help)");
    }
    if (!has_value) {
      if (spec->value_may_follow) {
        // "-a 3" as nccl-tests writes it; a bare -a (or --average) is -a 1, the average. The
        // benchmark has no positional arguments the value could be confused with.
        const bool follows = i + 1 < args.size() && !args[i + 1].empty() && args[i + 1][0] != '-';
        value = follows ? args[++i] : "1";
      } else if (!spec->takes_value) {
        // A switch may take an explicit 0/1 as the next argument ("--data_varying 1").
        const bool explicit_bool = i + 1 < args.size() && (args[i + 1] == "0" || args[i + 1] == "1");
        value = explicit_bool ? args[++i] : "1";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        throw InvalidArgument(shown + " needs a value");
      }
    }
    spec->apply(flags, shown, value);
    if (spec->letter == 'f') factor_given = true;
    if (spec->letter == 'i') step_given = true;
  }
  check_consistency(flags, factor_given, step_given);
  return flags;
}

void check_root(const BenchFlags& flags, int nranks, const std::string& source) {
  if (!op_has_root(flags.op) || flags.root < nranks) return;
  throw InvalidArgument("-r/--root " + std::to_string(flags.root) + " is not a rank of this " + std::to_string(nranks) +
                        "-rank job" + (source.empty() ? "" : " (" + source + ")") + ": expected 0 to " +
                        std::to_string(nranks - 1));
}

void check_checkable(const BenchFlags& flags, int nranks, const std::string& source) {
  std::string why;
  if (flags.check_iters == 0 || DataPattern::checkable(flags.dtype, flags.redop, op_reduces(flags.op), nranks, &why)) {
    return;
  }
  throw InvalidArgument("-c " + std::to_string(flags.check_iters) + " cannot check " + bench_op_name(flags.op) +
                        " of " + dtype_name(flags.dtype) + " " + flags.redop.name() + " over " +
                        std::to_string(nranks) + " ranks" + (source.empty() ? "" : " (" + source + ")") + ": " +
                        why + "; pass -c 0 to time it unchecked");
}

int iters_at(const BenchFlags& flags, int64_t bytes) {
  return flags.large_iters > 0 && bytes >= (int64_t{1} << 20) ? flags.large_iters : flags.iters;
}

std::vector<int64_t> size_sweep(const BenchFlags& flags) {
  if (!flags.sizes.empty()) return flags.sizes;
  std::vector<int64_t> sizes;
  for (int64_t size = flags.min_bytes; size <= flags.max_bytes;) {
    if (sizes.size() == kMaxSweepSizes) {
      throw InvalidArgument("-b " + std::to_string(flags.min_bytes) + " to -e " + std::to_string(flags.max_bytes) +
                            " in steps of " +
                            (flags.step_factor > 1 ? "x" + std::to_string(flags.step_factor)
                                                   : std::to_string(flags.step_bytes) + " bytes") +
                            " is more than " + std::to_string(kMaxSweepSizes) +
                            " sizes: take a larger step (-i) or a factor (-f)");
    }
    sizes.push_back(size);
    // Sizes and steps are at most kMaxBenchBytes: a sum cannot overflow, and a product past
    // -e ends the sweep before it is taken.
    if (flags.step_factor > 1 && size > flags.max_bytes / flags.step_factor) break;
    const int64_t next = flags.step_factor > 1 ? size * flags.step_factor : size + flags.step_bytes;
    if (next <= size) break;  // -b == -e with no step: one size
    size = next;
  }
  return sizes;
}

bool uses_cuda(const BenchFlags& flags, const std::string& backend) {
  if (flags.device != "auto") return flags.device == "cuda";
  return backend == "nccl";
}

std::string bench_usage(const std::string& program) {
  return "usage: " + program + R"( [flags]
Measures one collective over a range of sizes and prints an nccl-tests style table.
  --op NAME            all_reduce (default), all_gather, reduce_scatter, broadcast, reduce,
                       all_to_all, gather, scatter, send_recv (ring of pairs), barrier
  --backend NAME       gloo, mpi, nccl, ... (default: $DISTCOMM_BACKEND, else auto)
  --device WHERE       auto (default: cuda for nccl, else cpu), cpu, or cuda: buffers on
                       cuda:<local rank>, one GPU per rank, timed to the GPU's completion
  --config K=V,...     backend settings (docs/environment.md's keys), e.g. shm_slot_bytes=262144
  --nproc N            start N ranks on this machine; without it, ranks come from the
                       launcher or mpirun environment (a single rank when there is none)
  -b, --minbytes SIZE  smallest size (default 32M); sizes take K, M, G suffixes
  -e, --maxbytes SIZE  largest size (default 32M)
  -f, --stepfactor N   multiply the size by N each step
  -i, --stepbytes SIZE add SIZE each step (default 1M; give -f or -i, not both)
  --sizes A,B,...      these sizes, in this order, instead of -b/-e/-f/-i
  -n, --iters N        timed iterations per size (default 20)
  --large_iters N      timed iterations for sizes of 1M and more (default: -n's)
  -w, --warmup_iters N untimed iterations before each size (default 5)
  -c, --check N        checked iterations after timing, 0 for none (default 1); refused
                       where no check can see every rank (the average of int8 over 128+
                       ranks, of uint8 over 256+: always 0)
  -d, --datatype TYPE  float32 (default), float64, float16, bfloat16, int8, uint8, int32,
                       int64, bool
  -o, --redop OP       sum (default), prod, min, max, avg, band, bor, bxor
  -r, --root N         root rank of broadcast, reduce, gather, scatter (default 0)
  -a, --average N      how the time is combined across ranks, as nccl-tests does: each rank
                       times its -n calls as one loop (after a barrier) and divides by n; the
                       time is then 0 rank 0's, 1 the average of the ranks', 2 the fastest
                       rank's, 3 the slowest rank's (default 3 here; nccl-tests' default is 1;
                       a bare -a is -a 1). algbw and busbw are of that time
  --timeout SECONDS    fail instead of waiting longer than this for a peer (default 300)
  --data_varying       fresh input before every iteration (not timed), against cache-hot data
  --json FILE          one JSON object per result (out-of-place and in-place) per size;
                       checked to be writable before anything runs
  --plot FILE.svg      draw busbw against size: of this run, or of --plot_inputs
  --plot_inputs A,B    JSON files to draw (one line each) instead of running
  --version            print distcomm's version and exit
Exit status: 0 when every checked value was right, 1 when any was wrong or a rank failed,
2 for bad flags (an unknown --backend or --config key, an unwritable --json/--plot file
among them: refused before any rank starts).
)";
}

}  // namespace bench
}  // namespace distcomm
