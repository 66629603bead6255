#!/bin/bash
# Simulated hosts on one machine: N network namespaces ("hosts"), each joined to a bridge
# (in a "switch" namespace of its own) by a veth link whose both directions tc limits to a
# real bandwidth, and M ranks of a program in each, started with torchrun's variables.
#
#   tools/netns_hosts.sh --hosts 2 --ranks_per_host 2 [--rate 1gbit] -- PROGRAM [ARGS...]
#   tools/netns_hosts.sh --hosts 2 --per_host -- sh -c 'launch --nnodes=2 --node_rank=$NODE_RANK ...'
#   tools/netns_hosts.sh --hosts 2 --ranks_per_host 2 --launcher -- mpirun -np 4 ... tools/netns_rank.sh PROGRAM
#
# Rank r runs in host r / M (addresses 10.214.0.1, .2, ...) with RANK, WORLD_SIZE,
# LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR (host 0), MASTER_PORT, one job identity
# (DISTCOMM_RUN_ID, DISTCOMM_STORE_TOKEN) and DISTCOMM_HOST_ID=host<h>: distcomm's "auto"
# and "hier" count the namespaces as hosts (the ranks share a kernel and a PID namespace,
# which alone would let them share memory). Traffic between hosts crosses the shaped links;
# ranks of one host talk over its loopback, unshaped, as on a real machine. With --per_host
# PROGRAM runs once per host instead, as a launcher does on each machine, with NODE_RANK,
# NNODES, MASTER_ADDR, MASTER_PORT, the job identity and DISTCOMM_HOST_ID.
#
# With --launcher PROGRAM (mpirun) runs once, in host 0's namespace, and starts the ranks
# itself, each through tools/netns_rank.sh, which moves rank r into host r / M's namespace.
# PROGRAM gets MASTER_ADDR, MASTER_PORT, the job identity, NETNS_HOSTS_HOLDERS and
# NETNS_HOSTS_RANKS_PER_HOST (for netns_rank.sh), and Open MPI's settings that keep a job on
# the simulated network: OMPI_MCA_btl=tcp,self (no shared memory between ranks of different
# hosts), OMPI_MCA_btl_tcp_if_include and PMIX_MCA_ptl_base_if_include=10.214.0.0/24 (ranks
# in the other hosts reach mpirun's PMIx server over the bridge; its loopback is host 0's).
# A --mca flag on mpirun's command line overrides them.
#
# The link: a tbf qdisc at --rate on both ends of every host's veth (a host's sends and its
# receives). This kernel has no netem, so no delay is added: the links have bandwidth, and
# the veth's own latency (microseconds).
#
# --timeout S (default 3600): the ranks, or the launcher, still running after S seconds
# are stopped, and the script exits with 124.
#
# Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN), iproute2 and util-linux (tools/setup.sh). The
# namespaces are anonymous, each held by a sleeping process; when the script ends, also on
# Ctrl-C or SIGTERM, it stops whatever still runs in them (a launcher's ranks too) and the
# holders (killed with SIGKILL, it leaves those, and with them the namespaces, until they
# are killed). Exit status: the first rank to fail's (the launcher's), else 0.
set -u
# tc and ip live in sbin, which a test's (or a plain user's) PATH may lack.
export PATH="${PATH}:/usr/sbin:/sbin"

HOSTS=2
RANKS_PER_HOST=1
RATE=1gbit
PORT=29531
PER_HOST=0
LAUNCHER=0
TIMEOUT=3600
usage() {
  sed -n '2,39p' "$0" | sed 's/^# \{0,1\}//'
  exit "$1"
}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hosts) HOSTS="$2"; shift 2 ;;
    --ranks_per_host) RANKS_PER_HOST="$2"; shift 2 ;;
    --rate) RATE="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    --per_host) PER_HOST=1; shift ;;
    --launcher) LAUNCHER=1; shift ;;
    --timeout) TIMEOUT="$2"; shift 2 ;;
    -h | --help) usage 0 ;;
    --) shift; break ;;
    *) echo "netns_hosts.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
[[ $# -gt 0 ]] || { echo "netns_hosts.sh: no program given after --" >&2; exit 2; }
[[ "${HOSTS}" =~ ^[1-9][0-9]*$ && "${HOSTS}" -le 200 ]] || { echo "netns_hosts.sh: --hosts must be 1-200, got '${HOSTS}'" >&2; exit 2; }
[[ "${RANKS_PER_HOST}" =~ ^[1-9][0-9]*$ ]] || { echo "netns_hosts.sh: --ranks_per_host must be >= 1, got '${RANKS_PER_HOST}'" >&2; exit 2; }
((PER_HOST + LAUNCHER < 2)) || { echo "netns_hosts.sh: --per_host and --launcher exclude each other" >&2; exit 2; }
[[ "${TIMEOUT}" =~ ^[1-9][0-9]*$ ]] || { echo "netns_hosts.sh: --timeout must be a number of seconds >= 1, got '${TIMEOUT}'" >&2; exit 2; }
for tool in ip tc unshare nsenter; do
  command -v "${tool}" >/dev/null || { echo "netns_hosts.sh: the ${tool} command is not installed (tools/setup.sh)" >&2; exit 2; }
done

HOLDERS=()
RANK_PIDS=()
# The processes in our namespaces other than their holders: ranks a launcher started (which
# outlive it if it dies) keep a namespace, and its addresses, alive as long as they run.
# shellcheck disable=SC2317  # it and cleanup run from the EXIT trap
in_our_namespaces() {
  local pid path ns
  local -A ours=() holder=()
  for pid in "${HOLDERS[@]}"; do
    holder[${pid}]=1
    ns=$(readlink "/proc/${pid}/ns/net") && ours[${ns}]=1
  done
  # One find for every process's namespace (a readlink each would take seconds).
  while read -r path ns; do
    pid=${path#/proc/}
    pid=${pid%%/*}
    [[ -n "${ns}" && -n "${ours[${ns}]:-}" && -z "${holder[${pid}]:-}" ]] && echo "${pid}"
  done < <(find /proc/[0-9]*/ns/net -maxdepth 0 -printf '%p %l\n' 2>/dev/null)
}
# shellcheck disable=SC2317
cleanup() {
  local left=()
  mapfile -t left < <(in_our_namespaces)
  for pid in "${RANK_PIDS[@]}" "${left[@]}"; do kill "${pid}" 2>/dev/null; done
  # 5 s to end on SIGTERM (a launcher stops its ranks), then SIGKILL for what is left.
  for _ in $(seq 50); do
    mapfile -t left < <(in_our_namespaces)
    ((${#left[@]} == 0)) && break
    sleep 0.1
  done
  if ((${#left[@]} > 0)); then
    echo "netns_hosts.sh: killing what still runs in the namespaces (pids ${left[*]})" >&2
    kill -9 "${left[@]}" 2>/dev/null
  fi
  for pid in "${HOLDERS[@]}"; do kill "${pid}" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A process in a new network namespace; prints its pid once the namespace exists.
new_namespace() {
  unshare --net -- sleep 100000 >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 100); do
    kill -0 "${pid}" 2>/dev/null || { echo "unshare --net failed (root needed)" >&2; return 1; }
    if [[ "$(readlink "/proc/${pid}/ns/net")" != "$(readlink /proc/$$/ns/net)" ]]; then
      echo "${pid}"
      return 0
    fi
    sleep 0.02
  done
  kill "${pid}" 2>/dev/null
  return 1
}
in_ns() {
  local pid=$1
  shift
  nsenter --net="/proc/${pid}/ns/net" "$@"
}
# Both directions of a link at RATE: a burst of 256 KiB lets the veth's 64 KiB segments through.
shape() {
  in_ns "$1" tc qdisc add dev "$2" root tbf rate "${RATE}" burst 256kb latency 100ms
}

SWITCH=$(new_namespace) || exit 2
HOLDERS+=("${SWITCH}")
in_ns "${SWITCH}" ip link add dcbr type bridge && in_ns "${SWITCH}" ip link set dcbr up || exit 2
HOST_NS=()
for ((h = 0; h < HOSTS; h++)); do
  ns=$(new_namespace) || exit 2
  HOLDERS+=("${ns}")
  HOST_NS+=("${ns}")
  {
    in_ns "${ns}" ip link add "eth${h}" type veth peer name "port${h}" netns "${SWITCH}" &&
      in_ns "${ns}" ip addr add "10.214.0.$((h + 1))/24" dev "eth${h}" &&
      in_ns "${ns}" ip link set lo up &&
      in_ns "${ns}" ip link set "eth${h}" up &&
      in_ns "${SWITCH}" ip link set "port${h}" master dcbr &&
      in_ns "${SWITCH}" ip link set "port${h}" up &&
      shape "${ns}" "eth${h}" && shape "${SWITCH}" "port${h}"
  } || { echo "netns_hosts.sh: could not set up host ${h}" >&2; exit 2; }
done

WORLD=$((HOSTS * RANKS_PER_HOST))
RUN_ID="netns-$$-$(date +%s%N)"
TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
common=(MASTER_ADDR=10.214.0.1 MASTER_PORT="${PORT}" DISTCOMM_RUN_ID="${RUN_ID}" DISTCOMM_STORE_TOKEN="${TOKEN}")
if ((PER_HOST)); then
  WORLD=${HOSTS}  # one process per host: "rank" below is the host's index
  for ((h = 0; h < HOSTS; h++)); do
    env NODE_RANK="${h}" NNODES="${HOSTS}" "${common[@]}" DISTCOMM_HOST_ID="host${h}" \
      nsenter --net="/proc/${HOST_NS[${h}]}/ns/net" "$@" &
    RANK_PIDS+=("$!")
  done
  RANKS_PER_HOST=1
elif ((LAUNCHER)); then
  WORLD=1  # one process, the launcher: "rank" 0 below
  net=10.214.0.0/24
  LAUNCHER_NAME=$1
  env NETNS_HOSTS_HOLDERS="${HOST_NS[*]}" NETNS_HOSTS_RANKS_PER_HOST="${RANKS_PER_HOST}" "${common[@]}" \
    OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include="${net}" PMIX_MCA_ptl_base_if_include="${net}" \
    nsenter --net="/proc/${HOST_NS[0]}/ns/net" "$@" &
  RANK_PIDS+=("$!")
else
  for ((r = 0; r < WORLD; r++)); do
    h=$((r / RANKS_PER_HOST))
    env RANK="${r}" WORLD_SIZE="${WORLD}" LOCAL_RANK=$((r % RANKS_PER_HOST)) LOCAL_WORLD_SIZE="${RANKS_PER_HOST}" \
      "${common[@]}" DISTCOMM_HOST_ID="host${h}" nsenter --net="/proc/${HOST_NS[${h}]}/ns/net" "$@" &
    RANK_PIDS+=("$!")
  done
fi
declare -A RANK_OF
for ((r = 0; r < WORLD; r++)); do RANK_OF[${RANK_PIDS[${r}]}]=${r}; done
describe_pids() {  # what the processes PID... are, for messages
  local pid r what=""
  for pid in "$@"; do
    r=${RANK_OF[${pid}]}
    what+="${what:+, }"
    if ((LAUNCHER)); then
      what+="the launcher (${LAUNCHER_NAME})"
    elif ((PER_HOST)); then
      what+="host ${r}'s process"
    else
      what+="rank ${r} (host $((r / RANKS_PER_HOST)))"
    fi
  done
  echo "${what}"
}
# In the order the ranks end, so that the first to fail is the one named (the others
# usually fail soon after it, with their own status). Polled, not `wait -n PID...`: when
# two ranks end together bash may reap both while reporting one, and a later `wait -n`
# on the other answers "no such job"; `wait PID` still returns a reaped child's status.
status=0
deadline=$((SECONDS + TIMEOUT))
running=("${RANK_PIDS[@]}")
while ((${#running[@]} > 0)); do
  if ((SECONDS >= deadline)); then
    echo "netns_hosts.sh: still running after --timeout ${TIMEOUT} s: $(describe_pids "${running[@]}"); stopping them" >&2
    exit 124  # cleanup stops them
  fi
  left=()
  for pid in "${running[@]}"; do
    if kill -0 "${pid}" 2>/dev/null && [[ "$(sed 's/.*) //' "/proc/${pid}/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]]; then
      left+=("${pid}")
      continue
    fi
    wait "${pid}"
    rc=$?
    if [[ "${rc}" -ne 0 && "${status}" -eq 0 ]]; then
      status="${rc}"
      echo "netns_hosts.sh: $(describe_pids "${pid}") exited with status ${rc}$( ((WORLD > 1)) && echo "; stopping the others")" >&2
      for other in "${RANK_PIDS[@]}"; do kill "${other}" 2>/dev/null; done
    fi
  done
  running=("${left[@]}")
  ((${#running[@]} > 0)) && sleep 0.05
done
RANK_PIDS=()
exit "${status}"
