"""Per-step GPU times of one luminal DLRM call (LUMINAL_PROFILE=1 runs steps one by one)."""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "dlrm"))
from model import DLRM, KAGGLE, MINI, make_inputs  # noqa: E402

config = {"kaggle": KAGGLE, "mini": MINI}[sys.argv[1] if len(sys.argv) > 1 else "kaggle"]
model = DLRM(config).cuda().eval()
inputs = make_inputs(config, 2048, 1, device="cuda")
compiled = torch.compile(model, backend="luminal")
with torch.no_grad():
    for _ in range(3):
        compiled(*inputs)
    torch.cuda.synchronize()
    os.environ["LUMINAL_PROFILE"] = "1"
    compiled(*inputs)
    torch.cuda.synchronize()
