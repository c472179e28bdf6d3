#!/usr/bin/env python3
"""PyTorch CPU inference time of the reference models, for bench/cpu_infer.sh.

Builds the model of ../shared/bench/torch_fmnist.py (the d2l ResNet-18 or LeNet),
puts it in eval mode and times forward passes on random inputs under no_grad.
Prints one JSON line: {"model": ..., "batch": ..., "threads": ..., "median_ms": ...}.
"""
import argparse, json, os, statistics, sys, time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "shared", "bench"))
import torch_fmnist  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["resnet18", "lenet"], default="resnet18")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    net = torch_fmnist.resnet18() if args.model == "resnet18" else torch_fmnist.lenet()
    net.eval()
    x = torch.rand(args.batch, 1, 28, 28)
    times = []
    with torch.no_grad():
        net(x)  # warm-up: allocations, oneDNN primitive creation
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            net(x)
            times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"model": args.model, "batch": args.batch, "threads": args.threads,
                      "median_ms": statistics.median(times), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
