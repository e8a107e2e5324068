"""Plots a dlrm_bench.py JSON report: per-call median by backend for each config, and the
batch x tables sweep. Needs matplotlib.

    python benchmarks/plot_dlrm.py bench.json bench.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ORDER = ["eager", "inductor", "inductor-ro", "cudagraph", "luminal-general", "luminal", "floor", "compile-floor"]


def draw(report: dict[str, Any], path: Path, plt: Any) -> None:
    sweep: dict[str, Any] = report.get("sweep", {})
    tables = sorted({int(k.split("_")[0][6:]) for k in sweep})
    panels = 1 + len(tables)
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.5), squeeze=False)
    ax = axes[0][0]
    configs = list(report["results"])
    backends = [b for b in ORDER if any(b in report["results"][c] for c in configs)]
    width = 0.8 / max(len(backends), 1)
    for k, backend in enumerate(backends):
        values = [report["results"][c].get(backend, {}).get("median_us", 0.0) for c in configs]
        ax.bar([i + k * width for i in range(len(configs))], values, width, label=backend)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(configs))], configs)
    ax.set_yscale("log")
    ax.set_ylabel("per-call median (us, log)")
    ax.set_title(f"batch {report['batch']}, {report['device']}")
    ax.legend(fontsize=7)
    for panel, count in enumerate(tables, start=1):
        ax = axes[0][panel]
        keys = sorted((k for k in sweep if k.startswith(f"tables{count}_")), key=lambda k: int(k.split("batch")[1]))
        batches = [int(k.split("batch")[1]) for k in keys]
        for backend in backends:
            ax.plot(
                batches, [sweep[k].get(backend, {}).get("median_us", float("nan")) for k in keys], "o-", label=backend
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch")
        ax.set_title(f"mini DLRM, {count} tables")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    draw(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]), plt)


if __name__ == "__main__":
    main()
