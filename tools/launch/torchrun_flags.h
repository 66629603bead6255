// What tools/launch takes from torchrun's command line beyond the flags both share: the
// words --nproc_per_node accepts, the flags that only make sense for Python (refused with
// what to do instead) and the PET_<FLAG> variables torchrun reads its flags from (as
// Kubeflow's PyTorchJob passes them). Kept apart from main.cc so that the rules have one home.
#pragma once

#include <string>
#include <vector>

namespace distcomm {
namespace launch {

// --nproc_per_node: a count >= 1, or torchrun's words: "cpu" (the cores this process may
// run on), "gpu" (the machine's CUDA devices, /dev/nvidia<N>; none is an error), "auto"
// (the GPUs if any, else the cores). Throws std::invalid_argument naming the flag.
int parse_nproc_per_node(const std::string& text);

// --rdzv_backend: "static" (the default: --master_addr/--master_port) or "c10d" (the
// launchers meet at --rdzv_endpoint; with --standalone, on this machine). Throws
// std::invalid_argument for any other (etcd: not supported), and for c10d without an
// endpoint or "static" with one.
void check_rdzv_backend(const std::string& backend, const std::string& endpoint, bool standalone);

// A duration flag in seconds: finite, in [0, 10^9] (or exactly -1 where that means off).
// Returns milliseconds (-1000 for off); throws std::invalid_argument quoting the value.
long long seconds_flag(const std::string& name, double seconds, bool minus_one_is_off = false);

// For a flag the launcher does not take, as typed ("-m", "--run-path"): what torchrun uses
// it for and what to do here, or "" when it is not one of torchrun's.
std::string torchrun_only_flag_hint(const std::string& typed);

// torchrun's --tee/-t take a stream number or a per-rank map; here --tee is a switch. What
// to use instead, for `typed` as written ("--tee", "-t").
std::string tee_hint(const std::string& typed);

// "0" to "3", or a per-rank map such as "0:1,1:2": a value of torchrun's --tee (or
// --redirects), not a program's name.
bool looks_like_torchrun_tee_value(const std::string& value);

// "nproc_per_node" -> "PET_NPROC_PER_NODE".
std::string pet_variable(const std::string& flag);

// `message` (a refusal that names flags as "--flag=value" or "--flag") with each of
// `from_pet`, the flags whose value came from PET_<FLAG> rather than the command line,
// named as its variable: "--nproc_per_node=x: ..." -> "PET_NPROC_PER_NODE=x: ...". The
// user who never typed the flag is told what to change.
std::string name_pet_variables(std::string message, const std::vector<std::string>& from_pet);

}  // namespace launch
}  // namespace distcomm
