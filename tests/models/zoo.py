"""The model zoo: tiny random-initialised Hugging Face, torchvision and timm models (no downloads).

Each entry builds a model and its inputs on a device and dtype; the tests compare luminal with
eager on it and require that nothing fell back. Sizes are tiny (two layers, hidden 64, images of
32-64 pixels) so that the CPU reference engine runs the whole zoo in CI. Outputs are made
non-degenerate: heads that their libraries zero-initialise get random weights, and BatchNorm gets
random running statistics and affine parameters.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

VOCAB = 96
SEQUENCE = 11
# The fields of every tiny Llama-like decoder (tools/sweep_models.py builds its decoders from them too).
DECODER_FIELDS: dict[str, int] = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=112,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)


@dataclass(frozen=True)
class ZooModel:
    name: str
    library: str  # the module that must be importable: "transformers", "torchvision" or "timm"
    build: Callable[[str, torch.dtype], tuple[torch.nn.Module, Callable[..., Any], tuple[Any, ...]]]
    # Extra tolerance over the per-dtype defaults (long reductions, many layers).
    tolerance_scale: float = 8.0
    llm: bool = False  # also run in bf16 on CUDA


def available(library: str) -> bool:
    return importlib.util.find_spec(library) is not None


def randomize_normalization(model: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
    """BatchNorm with running mean 0 and variance 1 and an identity affine hides bugs: give every
    normalization random statistics and affine parameters (kept in ranges that stay stable)."""
    generator = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            if module.running_mean is not None:
                module.running_mean.copy_(torch.randn(module.running_mean.shape, generator=generator) * 0.1)
                module.running_var.copy_(torch.rand(module.running_var.shape, generator=generator) * 0.5 + 0.75)
        if isinstance(module, (torch.nn.modules.batchnorm._BatchNorm, torch.nn.LayerNorm, torch.nn.GroupNorm)):
            if getattr(module, "weight", None) is not None:
                module.weight.data.copy_(torch.rand(module.weight.shape, generator=generator) * 0.5 + 0.75)
            if getattr(module, "bias", None) is not None:
                module.bias.data.copy_(torch.randn(module.bias.shape, generator=generator) * 0.1)
    return model


def randomize_zero_linears(model: torch.nn.Module, seed: int = 2) -> torch.nn.Module:
    """Linear layers whose weights are all zero (zero-initialised heads) get random weights."""
    generator = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and not module.weight.detach().any():
            bound = 1.0 / max(module.in_features, 1) ** 0.5
            module.weight.data.copy_((torch.rand(module.weight.shape, generator=generator) * 2 - 1) * bound)
            if module.bias is not None:
                module.bias.data.copy_((torch.rand(module.bias.shape, generator=generator) * 2 - 1) * bound)
    return model


def _finish(model: torch.nn.Module, device: str, dtype: torch.dtype) -> torch.nn.Module:
    return model.to(device=device, dtype=dtype).eval()


# ------------------------------------------------------------------------------------------------
# Hugging Face
# ------------------------------------------------------------------------------------------------
def decoder_config(name: str, **overrides: Any) -> Any:
    import transformers

    return getattr(transformers, name)(**{**DECODER_FIELDS, **overrides})


def _causal_lm(class_name: str, config: Any) -> Callable[[str, torch.dtype], Any]:
    def build(device: str, dtype: torch.dtype) -> tuple[torch.nn.Module, Callable[..., Any], tuple[Any, ...]]:
        import transformers

        torch.manual_seed(0)
        model = _finish(getattr(transformers, class_name)(config()), device, dtype)
        ids = torch.randint(3, VOCAB, (2, SEQUENCE), device=device)
        mask = torch.ones_like(ids)
        mask[1, :3] = 0  # left padding

        def forward(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits

        return model, forward, (ids, mask)

    return build


def _encoder(class_name: str, config: Any, inputs: str = "ids") -> Callable[[str, torch.dtype], Any]:
    def build(device: str, dtype: torch.dtype) -> tuple[torch.nn.Module, Callable[..., Any], tuple[Any, ...]]:
        import transformers

        torch.manual_seed(0)
        model = _finish(getattr(transformers, class_name)(config()), device, dtype)
        if inputs == "pixels":
            pixels = torch.randn(2, 3, 32, 32, device=device, dtype=dtype)
            return model, lambda p: model(pixel_values=p).last_hidden_state, (pixels,)
        ids = torch.randint(3, VOCAB, (2, SEQUENCE), device=device)
        mask = torch.ones_like(ids)
        mask[1, -4:] = 0  # right padding

        def forward(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

        return model, forward, (ids, mask)

    return build


def _hf(name: str, **overrides: Any) -> Callable[[], Any]:
    return lambda: decoder_config(name, **overrides)


def _plain_config(name: str, **fields: Any) -> Callable[[], Any]:
    def make() -> Any:
        import transformers

        return getattr(transformers, name)(**fields)

    return make


HF_MODELS = [
    ZooModel("llama", "transformers", _causal_lm("LlamaForCausalLM", _hf("LlamaConfig")), llm=True),
    ZooModel("qwen2", "transformers", _causal_lm("Qwen2ForCausalLM", _hf("Qwen2Config")), llm=True),
    ZooModel("qwen3", "transformers", _causal_lm("Qwen3ForCausalLM", _hf("Qwen3Config", head_dim=16)), llm=True),
    ZooModel("mistral", "transformers", _causal_lm("MistralForCausalLM", _hf("MistralConfig")), llm=True),
    ZooModel(
        "gemma2",
        "transformers",
        _causal_lm("Gemma2ForCausalLM", _hf("Gemma2Config", head_dim=16, sliding_window=8)),
        llm=True,
    ),
    ZooModel(
        "gemma3",
        "transformers",
        _causal_lm("Gemma3ForCausalLM", _hf("Gemma3TextConfig", head_dim=16, sliding_window=8)),
        llm=True,
    ),
    ZooModel("phi3", "transformers", _causal_lm("Phi3ForCausalLM", _hf("Phi3Config")), llm=True),
    ZooModel(
        "gpt2",
        "transformers",
        _causal_lm(
            "GPT2LMHeadModel",
            _plain_config("GPT2Config", vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64),
        ),
        llm=True,
    ),
    ZooModel(
        "qwen3_moe",
        "transformers",
        _causal_lm(
            "Qwen3MoeForCausalLM",
            _hf("Qwen3MoeConfig", head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32),
        ),
        llm=True,
    ),
    ZooModel(
        "mixtral",
        "transformers",
        _causal_lm("MixtralForCausalLM", _hf("MixtralConfig", num_local_experts=4, num_experts_per_tok=2)),
        llm=True,
    ),
    ZooModel(
        "bert",
        "transformers",
        _encoder(
            "BertModel",
            _plain_config(
                "BertConfig",
                vocab_size=VOCAB,
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=112,
                max_position_embeddings=64,
            ),
        ),
    ),
    ZooModel(
        "distilbert",
        "transformers",
        _encoder(
            "DistilBertModel",
            _plain_config(
                "DistilBertConfig",
                vocab_size=VOCAB,
                dim=64,
                n_layers=2,
                n_heads=4,
                hidden_dim=112,
                max_position_embeddings=64,
            ),
        ),
    ),
    ZooModel(
        "t5_encoder",
        "transformers",
        _encoder(
            "T5EncoderModel",
            _plain_config("T5Config", vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=112, num_layers=2, num_heads=4),
        ),
    ),
    ZooModel(
        "vit",
        "transformers",
        _encoder(
            "ViTModel",
            _plain_config(
                "ViTConfig",
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=112,
                image_size=32,
                patch_size=8,
            ),
            inputs="pixels",
        ),
    ),
]


# ------------------------------------------------------------------------------------------------
# torchvision and timm
# ------------------------------------------------------------------------------------------------
def _vision(make: Callable[[], torch.nn.Module], size: int) -> Callable[[str, torch.dtype], Any]:
    def build(device: str, dtype: torch.dtype) -> tuple[torch.nn.Module, Callable[..., Any], tuple[Any, ...]]:
        torch.manual_seed(0)
        model = randomize_zero_linears(randomize_normalization(make()))
        model = _finish(model, device, dtype)
        images = torch.randn(2, 3, size, size, device=device, dtype=dtype)
        return model, model, (images,)

    return build


def _torchvision(name: str, **kwargs: Any) -> Callable[[], torch.nn.Module]:
    def make() -> torch.nn.Module:
        import torchvision

        return getattr(torchvision.models, name)(weights=None, num_classes=10, **kwargs)

    return make


def _small_vit() -> torch.nn.Module:
    from torchvision.models.vision_transformer import VisionTransformer

    return VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=112, num_classes=10
    )


def _timm(name: str, **kwargs: Any) -> Callable[[], torch.nn.Module]:
    def make() -> torch.nn.Module:
        import timm

        return timm.create_model(name, pretrained=False, num_classes=10, **kwargs)

    return make


VISION_MODELS = [
    ZooModel("tv_resnet18", "torchvision", _vision(_torchvision("resnet18"), 32)),
    ZooModel("tv_mobilenet_v3_small", "torchvision", _vision(_torchvision("mobilenet_v3_small"), 32)),
    ZooModel("tv_efficientnet_b0", "torchvision", _vision(_torchvision("efficientnet_b0"), 32)),
    ZooModel("tv_convnext_tiny", "torchvision", _vision(_torchvision("convnext_tiny"), 32)),
    ZooModel("tv_regnet_y_400mf", "torchvision", _vision(_torchvision("regnet_y_400mf"), 32)),
    ZooModel("tv_swin_t", "torchvision", _vision(_torchvision("swin_t"), 64)),
    ZooModel("tv_vit_small", "torchvision", _vision(_small_vit, 32)),
    ZooModel("timm_resnet18d", "timm", _vision(_timm("resnet18d"), 32)),
    ZooModel("timm_efficientnet_b0", "timm", _vision(_timm("efficientnet_b0"), 32)),
    ZooModel("timm_vit_tiny", "timm", _vision(_timm("vit_tiny_patch16_224", img_size=32, depth=2), 32)),
]

ZOO = HF_MODELS + VISION_MODELS
