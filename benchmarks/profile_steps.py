"""Per-step GPU times of luminal's CUDA plan for one benchmark config (LUMINAL_PROFILE=1: every
kernel and library call runs on its own between events, outside the CUDA graph; for finding where
time goes).

    python benchmarks/profile_steps.py kaggle [--batch 2048] [--no-megakernel]
"""

from __future__ import annotations

import argparse
import os

import torch
from dlrm_bench import CONFIGS, make_workload

import luminal
from luminal.settings import reload as reload_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", choices=sorted(CONFIGS))
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--no-megakernel", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    model, inputs = make_workload(CONFIGS[args.config], args.batch)
    compiled = torch.compile(model, backend=luminal.luminal_backend, options={"megakernel": not args.no_megakernel})
    with torch.no_grad():
        for _ in range(3):  # the first calls compile and choose matmul algorithms
            compiled(*inputs)
        torch.cuda.synchronize()
        print(f"--- {args.config}, batch {args.batch}: one profiled call", flush=True)
        os.environ["LUMINAL_PROFILE"] = "1"
        reload_settings()  # the core reads its configuration once, until told to read it again
        # A sleeping kernel first lets the host queue every step before the GPU reaches them, so that
        # the per-step events time the GPU's work and not the host's launch latency.
        torch.cuda._sleep(50_000_000)
        compiled(*inputs)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
