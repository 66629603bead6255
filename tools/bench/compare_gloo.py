#!/usr/bin/python3
"""distcomm's gloo all_reduce against raw Gloo and PyTorch's gloo, as separate jobs.

    tools/bench/compare_gloo.py [--nproc=2] [--rounds=3] [--sizes=8,64K,1M,4M,16M,64M]
        [--iters=200] [--large_iters=20] [--warmup=5] [--no_build] [--bin_dir=DIR]
        [--skip=torch]

Each round runs three jobs one after the other, the order rotating from round to round:
  raw       tools/bench/overhead/raw_gloo_bench: gloo::allreduce (ring, gloo's default) on
            a context of its own, no distcomm in the process;
  distcomm  tools/bench (bench --op=all_reduce --backend=gloo), one job per size;
  torch     tools/bench/torch_gloo_bench.py: torch.distributed's gloo (Debian's
            python3-torch, under /usr/bin/python3).
All three time `op; wait` per iteration on every rank, take the slowest rank's time per
iteration and its median over iterations (bench's time_median_us); the table shows the
median over rounds, busbw from it (2(n-1)/n, GB = 1e9 B), and distcomm's ratio to each
(busbw ratio = their time / distcomm's). The aims: from 1 MiB busbw at least 95% of raw
gloo's; at 8 B at most 10% or 20 us (the larger) more time than raw gloo; never slower
than torch. Builds with bazel -c opt first unless --no_build. Numbers from a loaded
machine are noise: the load average is printed with the table.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_bytes(text):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text[:-1] if scale > 1 else text) * scale


def result_lines(output):
    """{bytes: median_us} from key=value result lines (timed_loop.h's format)."""
    medians = {}
    for line in output.splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if "median_us" in fields:
            medians[int(fields["bytes"])] = float(fields["median_us"])
    return medians


def run(cmd, what):
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"compare_gloo: {what} failed ({' '.join(cmd)}):\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def job_raw(args, bin_dir):
    out = run([os.path.join(bin_dir, "tools/bench/overhead/raw_gloo_bench"), f"--nproc={args.nproc}",
               f"--sizes={args.sizes}", f"--iters={args.iters}", f"--large_iters={args.large_iters}",
               f"--warmup={args.warmup}"], "raw gloo")
    return result_lines(out)


def job_torch(args, bin_dir):
    out = run(["/usr/bin/python3", os.path.join(ROOT, "tools/bench/torch_gloo_bench.py"), f"--nproc={args.nproc}",
               f"--sizes={args.sizes}", f"--iters={args.iters}", f"--large_iters={args.large_iters}",
               f"--warmup={args.warmup}"], "torch")
    return result_lines(out)


def job_distcomm(args, bin_dir):
    medians = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.size_list:
            iters = args.large_iters if size >= (1 << 20) else args.iters
            path = os.path.join(tmp, f"{size}.json")
            run([os.path.join(bin_dir, "tools/bench/bench"), "--op=all_reduce", "--backend=gloo",
                 f"--nproc={args.nproc}", "-b", str(size), "-e", str(size), "-n", str(iters), "-w",
                 str(args.warmup), "-c", "1", "--json", path], "distcomm bench")
            with open(path) as f:
                for line in f:
                    if line.strip():
                        r = json.loads(line)
                        medians[int(r["bytes"])] = float(r["time_median_us"])
    return medians


JOBS = {"raw": job_raw, "distcomm": job_distcomm, "torch": job_torch}


def busbw(size, us, n):
    return size / (us * 1e3) * 2 * (n - 1) / n if us > 0 else 0.0


def verdict(size, raw, dc, torch):
    notes = []
    if raw is not None:
        if size >= (1 << 20):
            notes.append("raw: met" if raw / dc >= 0.95 else "raw: MISSED")
        elif size <= 8:
            notes.append("raw: met" if dc - raw <= max(20.0, 0.1 * raw) else "raw: MISSED")
    if torch is not None:
        notes.append("torch: met" if dc <= torch else "torch: MISSED")
    return ", ".join(notes) or "-"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sizes", default="8,64K,1M,4M,16M,64M")
    p.add_argument("--iters", type=int, default=200, help="timed iterations below 1 MiB")
    p.add_argument("--large_iters", type=int, default=20, help="timed iterations from 1 MiB")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no_build", action="store_true")
    p.add_argument("--bin_dir", help="bazel-bin of a -c opt build (default: asks bazel)")
    p.add_argument("--skip", default="", help="comma-separated jobs to leave out: raw, torch")
    args = p.parse_args()
    args.size_list = [parse_bytes(s) for s in args.sizes.split(",")]
    if args.rounds < 1 or args.nproc < 2:
        sys.exit("compare_gloo: --rounds must be >= 1 and --nproc >= 2")
    skip = {s for s in args.skip.split(",") if s}
    jobs = [j for j in ("raw", "distcomm", "torch") if j not in skip]
    if not args.no_build:
        run(["bazel", "build", "-c", "opt", "//tools/bench", "//tools/bench/overhead:raw_gloo_bench"], "bazel build")
    bin_dir = args.bin_dir or run(["bazel", "info", "-c", "opt", "bazel-bin"], "bazel info").strip()
    if not args.no_build or not args.bin_dir:
        # Bazel ran: an idle server's threads take the measured ranks' cores (tools/measure_build.sh).
        run(["bazel", "shutdown"], "bazel shutdown")

    load_before = open("/proc/loadavg").read().split()[:3]
    results = {j: [] for j in jobs}  # job -> one {bytes: median_us} per round
    for r in range(args.rounds):
        order = jobs[r % len(jobs):] + jobs[:r % len(jobs)]
        if r % 2:
            order.reverse()
        for job in order:
            results[job].append(JOBS[job](args, bin_dir))
            print(f"# round {r + 1}/{args.rounds}: {job} done", flush=True)
    load_after = open("/proc/loadavg").read().split()[:3]

    n = args.nproc
    print(f"# all_reduce, {n} ranks, float32 sum, in place; separate jobs, {args.rounds} rounds in rotating order")
    print(f"# per job: median over iterations of the slowest rank's time; columns: median over rounds")
    print(f"# load average before {' '.join(load_before)}, after {' '.join(load_after)}")
    head = ["size (B)"] + [f"{j} (us)" for j in jobs] + [f"{j} busbw" for j in jobs]
    head += [f"busbw dc/{j}" for j in jobs if j != "distcomm"] + ["aims"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * (len(head) - 1) + "---|")
    for size in sorted(results["distcomm"][0]):
        med = {j: statistics.median(rounds[size] for rounds in results[j]) for j in jobs}
        row = [str(size)] + [f"{med[j]:.1f}" for j in jobs] + [f"{busbw(size, med[j], n):.3f}" for j in jobs]
        row += [f"{med[j] / med['distcomm']:.2f}" for j in jobs if j != "distcomm"]
        row.append(verdict(size, med.get("raw"), med["distcomm"], med.get("torch")))
        print("| " + " | ".join(row) + " |")
    print("# per round (us):")
    for j in jobs:
        for size in sorted(results[j][0]):
            print(f"#   {j:8s} {size:>10d}: " + " ".join(f"{rounds[size]:.1f}" for rounds in results[j]))
    print("# compare_gloo: done")


if __name__ == "__main__":
    main()
