#!/usr/bin/python3
"""PyTorch's own DDP (Python, gloo) on the model torch_ddp_bench.cc trains, timed the same way.

    /usr/bin/python3 tools/torch_ddp_bench/torch_ddp_bench.py --nproc=2 [--layers=8]
        [--width=1024] [--batch=64] [--iters=20] [--warmup=3] [--bucket_cap_mb=25]

Debian's python3-torch (1.13) is for /usr/bin/python3. One job: --nproc ranks started by
torch.multiprocessing.spawn, one intra-op thread each. Every rank trains two copies of the
MLP (--layers Linear(width, width) + ReLU, MSE loss, SGD): one alone ("local", no
communication) and one in torch.nn.parallel.DistributedDataParallel; they take turns, one
iteration each, each after an untimed barrier. Prints one line in torch_ddp_bench.cc's format (impl=torch_ddp): the
slowest rank's median iteration of each copy and exposed_ms = ddp_ms - local_ms.
"""
import argparse
import os
import socket
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_model(torch, args):
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def run_rank(rank, args, port):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=args.nproc)
    torch.manual_seed(1 + rank)
    x, y = torch.randn(args.batch, args.width), torch.randn(args.batch, args.width)
    local = make_model(torch, args)
    ddp = torch.nn.parallel.DistributedDataParallel(make_model(torch, args), bucket_cap_mb=args.bucket_cap_mb)
    copies = [(local, torch.optim.SGD(local.parameters(), lr=1e-3), []),
              (ddp, torch.optim.SGD(ddp.parameters(), lr=1e-3), [])]
    dist.barrier()
    for it in range(args.warmup + args.iters):
        for model, sgd, times in copies:
            dist.barrier()  # untimed: each step starts with the ranks together, as torch_ddp_bench.cc's
            start = time.perf_counter()
            sgd.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            sgd.step()
            if it >= args.warmup:
                times.append((time.perf_counter() - start) * 1e3)
    # The upper median, as torch_ddp_bench.cc takes it.
    medians = torch.tensor([sorted(times)[len(times) // 2] for _, _, times in copies], dtype=torch.float64)
    dist.all_reduce(medians, op=dist.ReduceOp.MAX)  # the slowest rank's
    if rank == 0:
        params = sum(p.numel() for p in local.parameters())
        local_ms, ddp_ms = medians.tolist()
        print(f"impl=torch_ddp nproc={args.nproc} params={params} bucket_mb={args.bucket_cap_mb:g} "
              f"batch={args.batch} local_ms={local_ms:.2f} ddp_ms={ddp_ms:.2f} exposed_ms={ddp_ms - local_ms:.2f}",
              flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--bucket_cap_mb", type=float, default=25)
    args = parser.parse_args()
    import torch.multiprocessing as mp

    mp.spawn(run_rank, args=(args, free_port()), nprocs=args.nproc)


if __name__ == "__main__":
    main()
