"""Smallest CUDA smoke test: one pointwise graph and one DLRM, compared with eager."""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "dlrm"))
from model import DLRM, MINI, make_inputs  # noqa: E402

x = torch.randn(5, 3, device="cuda")
f = torch.compile(lambda t: torch.sigmoid(t) * 2 + 1, backend="luminal")
print("pointwise max|diff|", (f(x) - (torch.sigmoid(x) * 2 + 1)).abs().max().item(), flush=True)
model = DLRM(MINI).cuda().eval()
compiled = torch.compile(model, backend="luminal")
with torch.no_grad():
    for batch in (7, 64):
        inputs = make_inputs(MINI, batch, 2, device="cuda")
        print("dlrm", batch, (compiled(*inputs) - model(*inputs)).abs().max().item(), flush=True)
