#!/usr/bin/python3
"""PyTorch's gloo all_reduce, timed the way raw_gloo_bench and gloo_overhead time theirs.

    /usr/bin/python3 tools/bench/torch_gloo_bench.py --nproc=2 [--sizes=8,64K,1M]
        [--iters=200] [--large_iters=20] [--warmup=5]

Debian's python3-torch (1.13) is for /usr/bin/python3. One job: --nproc ranks started by
torch.multiprocessing.spawn, float32 sum, in place, dist.all_reduce(t) per iteration (it
blocks: torch's gloo all_reduce without async_op waits). Prints one line per size in
tools/bench/overhead/timed_loop.h's format (impl=torch_gloo): the median and mean over
iterations of the slowest rank's time, busbw from the median (2(n-1)/n, GB = 1e9 B), and
CPU time and context switches per op of a rank's process.
"""
import argparse
import os
import resource
import socket
import statistics
import sys
import time


def parse_bytes(text):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    value = int(text[:-1] if scale > 1 else text)
    if value <= 0:
        raise ValueError(f"sizes must be positive, got {text}")
    return value * scale


def usage():
    u = resource.getrusage(resource.RUSAGE_SELF)  # every thread of the process
    return (u.ru_utime + u.ru_stime) * 1e6, u.ru_nvcsw + u.ru_nivcsw


def run_rank(rank, args, port):
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=args.nproc)
    n = args.nproc
    for nbytes in args.sizes:
        t = torch.zeros(max(1, nbytes // 4), dtype=torch.float32)  # zeros: sums stay zero
        iters = args.large_iters if nbytes >= (1 << 20) else args.iters
        for _ in range(args.warmup):
            dist.all_reduce(t)
        times = []
        cpu0, sw0 = usage()
        for _ in range(iters):
            start = time.perf_counter()
            dist.all_reduce(t)
            times.append((time.perf_counter() - start) * 1e6)
        cpu1, sw1 = usage()
        mine = torch.tensor(times + [(cpu1 - cpu0) / iters, (sw1 - sw0) / iters], dtype=torch.float64)
        every = [torch.empty_like(mine) for _ in range(n)]
        dist.all_gather(every, mine)
        if rank == 0:
            slowest = [max(float(e[i]) for e in every) for i in range(iters)]
            median = statistics.median(slowest)
            size = t.numel() * 4
            print(f"impl=torch_gloo op=all_reduce nranks={n} bytes={size} iters={iters} median_us={median:.2f} "
                  f"mean_us={statistics.fmean(slowest):.2f} busbw={size / (median * 1e3) * 2 * (n - 1) / n:.4f} "
                  f"cpu_us_per_op={sum(float(e[iters]) for e in every) / n:.2f} "
                  f"switches_per_op={sum(float(e[iters + 1]) for e in every) / n:.2f}", flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--sizes", default="8,64K,1M,4M,16M,64M")
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--large_iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()
    try:
        args.sizes = [parse_bytes(s) for s in args.sizes.split(",")]
        import torch.multiprocessing as mp
    except (ValueError, ImportError) as e:
        print(f"torch_gloo_bench: {e} (PyTorch: Debian's python3-torch, run with /usr/bin/python3)", file=sys.stderr)
        return 2
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    print(f"# torch {__import__('torch').__version__} gloo: all_reduce, {args.nproc} ranks, float32 sum", flush=True)
    mp.spawn(run_rank, args=(args, port), nprocs=args.nproc)
    print("# torch_gloo_bench: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
