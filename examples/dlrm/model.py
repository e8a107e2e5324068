"""A DLRM in the style of facebookresearch/dlrm: bottom MLP, one nn.EmbeddingBag per table, dot
interaction with the strictly-lower-triangular pairs gathered inside forward, top MLP."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

# Cardinalities of the 26 categorical features of the Criteo Kaggle (Display Advertising) dataset.
CRITEO_KAGGLE_CARDINALITIES = [
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
]  # fmt: skip


@dataclass(frozen=True)
class DLRMConfig:
    dense_features: int = 13
    bottom: tuple[int, ...] = (8, 4)  # widths; the last is the embedding dimension
    tables: tuple[int, ...] = (10, 20, 30)  # rows per embedding table
    top: tuple[int, ...] = (8, 1)  # widths of the top MLP
    mode: str = "sum"  # embedding bag reduction
    final_sigmoid: bool = True
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def embedding_dim(self) -> int:
        return self.bottom[-1]


MINI = DLRMConfig()
KAGGLE = DLRMConfig(bottom=(512, 256, 64, 16), tables=tuple(CRITEO_KAGGLE_CARDINALITIES), top=(512, 256, 1))


def mlp(widths: list[int], final_sigmoid: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        last = i == len(widths) - 2
        if not last:
            layers.append(nn.ReLU())
        elif final_sigmoid:
            layers.append(nn.Sigmoid())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, config: DLRMConfig = MINI) -> None:
        super().__init__()
        self.config = config
        dim = config.embedding_dim
        # The bottom MLP ends in a ReLU like the reference implementation.
        self.bottom = mlp([config.dense_features, *config.bottom], final_sigmoid=False)
        self.bottom.append(nn.ReLU())
        self.embeddings = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode=config.mode) for rows in config.tables)
        features = len(config.tables) + 1
        interactions = features * (features - 1) // 2
        self.top = mlp([interactions + dim, *config.top], final_sigmoid=config.final_sigmoid)
        self.prebuilt_pairs = False

    def use_prebuilt_pairs(self) -> DLRM:
        """Keeps the pair indices in buffers instead of building them in forward (which a CUDA graph
        capture of eager cannot do: it copies from the host)."""
        features = len(self.config.tables) + 1
        pairs = [(i, j) for i in range(features) for j in range(i)]
        device = self.top[0].weight.device
        self.register_buffer("li", torch.tensor([i for i, _ in pairs], device=device), persistent=False)
        self.register_buffer("lj", torch.tensor([j for _, j in pairs], device=device), persistent=False)
        self.prebuilt_pairs = True
        return self

    def forward(self, dense: torch.Tensor, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        x = self.bottom(dense)
        pooled = [bag(indices[k], offsets[k]) for k, bag in enumerate(self.embeddings)]
        batch, dim = x.shape
        features = torch.cat([x, *pooled], dim=1).view(batch, -1, dim)
        z = torch.bmm(features, features.transpose(1, 2))
        if self.prebuilt_pairs:
            li, lj = self.li, self.lj
        else:
            _, ni, nj = z.shape
            li = torch.tensor([i for i in range(ni) for j in range(i)], device=z.device)
            lj = torch.tensor([j for i in range(nj) for j in range(i)], device=z.device)
        interactions = z[:, li, lj]
        return self.top(torch.cat([x, interactions], dim=1))


def make_inputs(
    config: DLRMConfig,
    batch: int,
    bag_size: int = 1,
    device: str | torch.device = "cpu",
    index_dtype: torch.dtype = torch.int64,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """Random dense features and, per table, `bag_size` random indices per sample."""
    dense = torch.randn(batch, config.dense_features, generator=generator).to(device)
    indices = [
        torch.randint(0, rows, (batch * bag_size,), generator=generator, dtype=index_dtype).to(device)
        for rows in config.tables
    ]
    offsets = [(torch.arange(batch, dtype=index_dtype) * bag_size).to(device) for _ in config.tables]
    return dense, indices, offsets
