#!/bin/bash
# One rank of a job that mpirun starts under tools/netns_hosts.sh --launcher: moves into its
# simulated host's network namespace, then runs PROGRAM there.
#
#   tools/netns_hosts.sh --hosts 2 --ranks_per_host 2 --launcher -- \
#       mpirun -np 4 --oversubscribe --mca pml ob1 tools/netns_rank.sh PROGRAM [ARGS...]
#
# Rank r (OMPI_COMM_WORLD_RANK) runs in host r / M, M being netns_hosts.sh's --ranks_per_host
# (mpirun's default mapping by slot numbers consecutive ranks on one machine alike), with
# DISTCOMM_HOST_ID=host<h>; MASTER_ADDR (host 0's 10.214.0.1, where rank 0 serves the
# store), MASTER_PORT and the job identity come from netns_hosts.sh. mpirun's own variables
# stay: to distcomm the rank is mpirun's, so its world group can go across hosts over mpi.
set -u
die() { echo "netns_rank.sh: $*" >&2; exit 2; }
[[ $# -gt 0 ]] || die "no program given"
[[ -n "${NETNS_HOSTS_HOLDERS:-}" && -n "${NETNS_HOSTS_RANKS_PER_HOST:-}" ]] ||
  die "NETNS_HOSTS_HOLDERS or NETNS_HOSTS_RANKS_PER_HOST is not set: run under tools/netns_hosts.sh --launcher"
rank=${OMPI_COMM_WORLD_RANK:-}
size=${OMPI_COMM_WORLD_SIZE:-}
[[ "${rank}" =~ ^[0-9]+$ && "${size}" =~ ^[0-9]+$ ]] ||
  die "OMPI_COMM_WORLD_RANK/SIZE are '${rank}'/'${size}': run under mpirun"
read -r -a holders <<<"${NETNS_HOSTS_HOLDERS}"
per_host=${NETNS_HOSTS_RANKS_PER_HOST}
# A job of another size would put ranks on hosts that do not exist, or leave hosts empty.
((size == ${#holders[@]} * per_host)) ||
  die "mpirun started ${size} ranks; ${#holders[@]} hosts x ${per_host} ranks need -np $((${#holders[@]} * per_host))"
host=$((rank / per_host))
ns="/proc/${holders[${host}]}/ns/net"
[[ -e "${ns}" ]] || die "rank ${rank}: host ${host}'s namespace (${ns}) is gone: has netns_hosts.sh ended?"
[[ -n "${MASTER_ADDR:-}" && -n "${MASTER_PORT:-}" ]] || die "MASTER_ADDR or MASTER_PORT is not set (netns_hosts.sh sets them)"
export DISTCOMM_HOST_ID="host${host}"
# torchrun's variables come before mpirun's in distcomm: one left over would make this rank a
# torchrun rank, whose world cannot go over mpi.
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
exec nsenter --net="${ns}" -- "$@"
