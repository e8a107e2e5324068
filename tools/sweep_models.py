"""The models of tools/model_sweep.py: tiny random-initialised Hugging Face, torchvision and timm
models, built offline (``from_config`` / ``pretrained=False``: small hidden sizes, two layers,
images of 32-64 pixels).

Each entry's ``build(device, dtype)`` returns ``(model, forward, inputs)``; ``forward(*inputs)`` is
what the sweep runs eagerly and through ``torch.compile(forward, backend="luminal")``. Decode
entries return ``(model, step, (cache,))`` for a StaticCache decode step. Libraries are imported
inside the builders, so that listing the models needs none of them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
from zoo import (  # noqa: E402  (the test zoo's sizes and randomization, shared)
    DECODER_FIELDS,
    SEQUENCE,
    VOCAB,
    randomize_normalization,
    randomize_zero_linears,
)

TOLERANCE_SCALE = 8.0  # times the per-dtype (rtol, atol) of tests/helpers.py

Built = tuple[Any, Callable[..., Any], tuple[Any, ...]]  # (model, forward, inputs)


@dataclass(frozen=True)
class Entry:
    name: str
    library: str  # module that must be importable
    build: Callable[[str, Any], Built]
    tolerance_scale: float = TOLERANCE_SCALE
    decode: bool = False  # build returns a StaticCache decode case (see run_decode)
    note: str = ""


# ================================================================================================
# Model builders
# ================================================================================================
def _finish(model: Any, device: str, dtype: Any) -> Any:
    return model.to(device=device, dtype=dtype).eval()


def _randomize(model: Any) -> Any:
    """Random BatchNorm statistics and affine parameters, random zero-initialised heads (zoo.py),
    and heads initialised near zero (timm's head_init_scale) re-drawn at the usual scale: an output
    of ~1e-5 would make the comparison weak."""
    generator = torch.Generator().manual_seed(3)
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and 0 < float(module.weight.detach().abs().max()) < 1e-3:
            bound = 1.0 / max(module.in_features, 1) ** 0.5
            module.weight.data.copy_((torch.rand(module.weight.shape, generator=generator) * 2 - 1) * bound)
    return randomize_zero_linears(randomize_normalization(model))


def _ids(device: str, pad_id: int | None = None, left_padding: bool = True) -> tuple[Any, Any]:
    ids = torch.randint(3, VOCAB, (2, SEQUENCE), device=device)
    mask = torch.ones_like(ids)
    if left_padding:
        mask[1, :3] = 0
    else:
        mask[1, -4:] = 0
    if pad_id is not None:
        ids = ids.masked_fill(mask == 0, pad_id)
    return ids, mask


def _hf_config(config_name: str, **fields: Any) -> Any:
    import transformers

    return getattr(transformers, config_name)(**fields)


def causal_lm(class_name: str, config_name: str, common: bool = True, **fields: Any) -> Callable[[str, Any], Built]:
    """A causal LM's logits for two left-padded sequences (use_cache=False)."""

    def build(device: str, dtype: Any) -> Built:
        import transformers

        torch.manual_seed(0)
        config = _hf_config(config_name, **({**DECODER_FIELDS, **fields} if common else fields))
        model = _finish(_randomize(getattr(transformers, class_name)(config)), device, dtype)
        ids, mask = _ids(device)

        def forward(input_ids: Any, attention_mask: Any) -> Any:
            return model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits

        return model, forward, (ids, mask)

    return build


def decode_step(class_name: str, config_name: str, **fields: Any) -> Callable[[str, Any], Built]:
    """A StaticCache decode case: (model, step, (cache,)); see run_decode."""

    def build(device: str, dtype: Any) -> Built:
        import transformers

        torch.manual_seed(0)
        model = getattr(transformers, class_name)(_hf_config(config_name, **{**DECODER_FIELDS, **fields}))
        model = _finish(model, device, dtype)
        cache = transformers.StaticCache(config=model.config, max_cache_len=24)
        prompt = torch.randint(3, VOCAB, (2, 5), device=device)
        with torch.no_grad():
            model(input_ids=prompt, past_key_values=cache, use_cache=True)  # prefill in eager

        def step(token: Any, position: Any, past: Any) -> Any:
            return model(input_ids=token, past_key_values=past, cache_position=position, use_cache=True).logits

        return model, step, (cache,)

    return build


def encoder(class_name: str, config_name: str, output: str = "last_hidden_state", **fields: Any):
    """An encoder on two right-padded sequences (padding positions hold the pad token)."""

    def build(device: str, dtype: Any) -> Built:
        import transformers

        torch.manual_seed(0)
        model = _finish(_randomize(getattr(transformers, class_name)(_hf_config(config_name, **fields))), device, dtype)
        pad = getattr(model.config, "pad_token_id", None)
        ids, mask = _ids(device, pad_id=pad, left_padding=False)

        def forward(input_ids: Any, attention_mask: Any) -> Any:
            return getattr(model(input_ids=input_ids, attention_mask=attention_mask), output)

        return model, forward, (ids, mask)

    return build


def seq2seq(class_name: str, config_name: str, output: str, **fields: Any) -> Callable[[str, Any], Built]:
    """Encoder-decoder: one full forward with decoder_input_ids."""

    def build(device: str, dtype: Any) -> Built:
        import transformers

        torch.manual_seed(0)
        model = _finish(_randomize(getattr(transformers, class_name)(_hf_config(config_name, **fields))), device, dtype)
        ids, mask = _ids(device, pad_id=model.config.pad_token_id, left_padding=False)
        decoder_ids = torch.randint(3, VOCAB, (2, 7), device=device)

        def forward(input_ids: Any, attention_mask: Any, decoder_input_ids: Any) -> Any:
            out = model(
                input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids, use_cache=False
            )
            return getattr(out, output)

        return model, forward, (ids, mask, decoder_ids)

    return build


def hf_pixels(
    class_name: str, config_name: str, output: str = "last_hidden_state", size: int = 32, **fields: Any
) -> Callable[[str, Any], Built]:
    def build(device: str, dtype: Any) -> Built:
        import transformers

        torch.manual_seed(0)
        model = _finish(_randomize(getattr(transformers, class_name)(_hf_config(config_name, **fields))), device, dtype)
        pixels = torch.randn(2, 3, size, size, device=device, dtype=dtype)

        def forward(pixel_values: Any) -> Any:
            return getattr(model(pixel_values=pixel_values), output)

        return model, forward, (pixels,)

    return build


def hf_clip(device: str, dtype: Any) -> Built:
    import transformers

    torch.manual_seed(0)
    text = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4)
    text.update(max_position_embeddings=64, eos_token_id=2, bos_token_id=1, pad_token_id=0)
    vision = dict(hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4, image_size=32)
    vision.update(patch_size=8)
    config = transformers.CLIPConfig(text_config=text, vision_config=vision, projection_dim=32)
    model = _finish(transformers.CLIPModel(config), device, dtype)
    ids, mask = _ids(device, left_padding=False)
    ids[:, -5] = 2  # an end-of-text token, whose hidden state is pooled
    pixels = torch.randn(2, 3, 32, 32, device=device, dtype=dtype)

    def forward(input_ids: Any, attention_mask: Any, pixel_values: Any) -> Any:
        return model(input_ids=input_ids, attention_mask=attention_mask, pixel_values=pixel_values).logits_per_image

    return model, forward, (ids, mask, pixels)


def hf_siglip(device: str, dtype: Any) -> Built:
    import transformers

    torch.manual_seed(0)
    text = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4)
    text.update(max_position_embeddings=SEQUENCE)
    vision = dict(hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4, image_size=32)
    vision.update(patch_size=8)
    model = _finish(
        transformers.SiglipModel(transformers.SiglipConfig(text_config=text, vision_config=vision)), device, dtype
    )
    ids = torch.randint(3, VOCAB, (2, SEQUENCE), device=device)
    pixels = torch.randn(2, 3, 32, 32, device=device, dtype=dtype)

    def forward(input_ids: Any, pixel_values: Any) -> Any:
        return model(input_ids=input_ids, pixel_values=pixel_values).logits_per_image

    return model, forward, (ids, pixels)


def hf_whisper(full: bool) -> Callable[[str, Any], Built]:
    def build(device: str, dtype: Any) -> Built:
        import transformers

        torch.manual_seed(0)
        config = transformers.WhisperConfig(
            vocab_size=VOCAB,
            d_model=64,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=112,
            decoder_ffn_dim=112,
            num_mel_bins=16,
            max_source_positions=16,
            max_target_positions=32,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=1,
        )
        model = _finish(transformers.WhisperModel(config), device, dtype)
        features = torch.randn(2, 16, 32, device=device, dtype=dtype)
        if not full:
            return model, lambda f: model.encoder(input_features=f).last_hidden_state, (features,)
        decoder_ids = torch.randint(3, VOCAB, (2, 7), device=device)

        def forward(input_features: Any, decoder_input_ids: Any) -> Any:
            return model(
                input_features=input_features, decoder_input_ids=decoder_input_ids, use_cache=False
            ).last_hidden_state

        return model, forward, (features, decoder_ids)

    return build


def hf_audio(class_name: str, config_name: str, **fields: Any) -> Callable[[str, Any], Built]:
    """Raw-waveform encoders (wav2vec2 family): 2 x 800 samples."""

    def build(device: str, dtype: Any) -> Built:
        import transformers

        torch.manual_seed(0)
        model = _finish(_randomize(getattr(transformers, class_name)(_hf_config(config_name, **fields))), device, dtype)
        audio = torch.randn(2, 800, device=device, dtype=dtype)
        return model, lambda a: model(input_values=a).last_hidden_state, (audio,)

    return build


def hf_custom(
    class_name: str,
    config: Callable[[], Any],
    inputs: Callable[[str, Any], dict[str, Any]],
    output: str = "last_hidden_state",
) -> Callable[[str, Any], Built]:
    """Any Hugging Face model: `inputs(device, dtype)` gives its keyword tensors (in call order)."""

    def build(device: str, dtype: Any) -> Built:
        import transformers

        torch.manual_seed(0)
        model = _finish(_randomize(getattr(transformers, class_name)(config())), device, dtype)
        named = inputs(device, dtype)

        def forward(*tensors: Any) -> Any:
            return getattr(model(**dict(zip(named, tensors, strict=True))), output)

        return model, forward, tuple(named.values())

    return build


def _config(name: str, **fields: Any) -> Callable[[], Any]:
    return lambda: _hf_config(name, **fields)


def _random(*shape: int, ids: bool = False) -> Callable[[str, Any], Any]:
    """A random float tensor of `shape` in the model's dtype, or token ids."""

    def make(device: str, dtype: Any) -> Any:
        if ids:
            return torch.randint(3, VOCAB, shape, device=device)
        return torch.randn(*shape, device=device, dtype=dtype)

    return make


def _named(**makers: Callable[[str, Any], Any]) -> Callable[[str, Any], dict[str, Any]]:
    return lambda device, dtype: {name: make(device, dtype) for name, make in makers.items()}


def vision(make: Callable[[], Any], size: int = 32, frames: int = 0, output: Callable[[Any], Any] | None = None):
    """A vision model on two random images (or clips of `frames` frames)."""

    def build(device: str, dtype: Any) -> Built:
        torch.manual_seed(0)
        model = _finish(_randomize(make()), device, dtype)
        shape = (2, 3, frames, size, size) if frames else (2, 3, size, size)
        images = torch.randn(*shape, device=device, dtype=dtype)
        if output is None:
            return model, model, (images,)
        return model, lambda x: output(model(x)), (images,)

    return build


def tv(name: str, **kwargs: Any) -> Callable[[], Any]:
    def make() -> Any:
        import torchvision

        kwargs.setdefault("weights", None)
        return getattr(torchvision.models, name)(**kwargs)

    return make


def tv_sub(package: str, name: str, **kwargs: Any) -> Callable[[], Any]:
    def make() -> Any:
        import importlib

        module = importlib.import_module(f"torchvision.models.{package}")
        kwargs.setdefault("weights", None)
        return getattr(module, name)(**kwargs)

    return make


def tv_small_vit() -> Any:
    from torchvision.models.vision_transformer import VisionTransformer

    return VisionTransformer(
        image_size=48,
        patch_size=16,
        num_layers=2,
        num_heads=4,
        hidden_dim=64,
        mlp_dim=112,
        num_classes=10,
        representation_size=32,
    )


def tv_small_maxvit() -> Any:
    from torchvision.models.maxvit import MaxVit

    return MaxVit(
        input_size=(64, 64),
        stem_channels=16,
        partition_size=2,
        block_channels=[16, 32, 32, 64],
        block_layers=[1, 1, 1, 1],
        head_dim=8,
        stochastic_depth_prob=0.0,
        num_classes=10,
    )


def tv_detection(name: str, size: int, heads_only: bool = False) -> Callable[[str, Any], Built]:
    """Detection models in eval mode return boxes, scores and labels of a data-dependent count (the
    whole pipeline: resizing, anchors, NMS). With random weights the scores nearly tie, so NMS keeps
    different boxes for rounding-level differences (eager float32 and float64 disagree as much):
    `heads_only` compares the backbone and head outputs before post-processing instead."""

    def build(device: str, dtype: Any) -> Built:
        import torchvision

        torch.manual_seed(0)
        make = getattr(torchvision.models.detection, name)
        model = _finish(_randomize(make(weights=None, weights_backbone=None, num_classes=5)), device, dtype)
        images = torch.rand(2, 3, size, size, device=device, dtype=dtype)

        def forward(x: Any) -> Any:
            return [(d["boxes"], d["scores"], d["labels"]) for d in model(list(x))]

        def heads(x: Any) -> Any:
            features = model.backbone(x)
            if hasattr(model, "rpn"):  # Faster R-CNN: the region proposal network's head
                return model.rpn.head(list(features.values()))
            return model.head(list(features.values()))  # SSD: box regression and class logits

        return model, heads if heads_only else forward, (images,)

    return build


def tv_raft(device: str, dtype: Any) -> Built:
    import torchvision

    torch.manual_seed(0)
    model = _finish(_randomize(torchvision.models.optical_flow.raft_small(weights=None)), device, dtype)
    first = torch.rand(1, 3, 128, 128, device=device, dtype=dtype) * 2 - 1  # the smallest RAFT takes
    second = torch.rand(1, 3, 128, 128, device=device, dtype=dtype) * 2 - 1
    return model, lambda a, b: model(a, b, num_flow_updates=2)[-1], (first, second)


def timm_model(name: str, **kwargs: Any) -> Callable[[], Any]:
    def make() -> Any:
        import timm

        return timm.create_model(name, pretrained=False, num_classes=10, **kwargs)

    return make


# ------------------------------------------------------------------------------------------------
# The registry
# ------------------------------------------------------------------------------------------------
# Hand-formatted: one model a line or a few, which the formatter would spread over many.
# fmt: off
def _hf_causal_models() -> list[Entry]:
    def e(name: str, cls: str, cfg: str, common: bool = True, **fields: Any) -> Entry:
        return Entry(f"hf_{name}", "transformers", causal_lm(cls, cfg, common, **fields))

    return [
        e("falcon", "FalconForCausalLM", "FalconConfig", num_kv_heads=1, multi_query=True, parallel_attn=True),
        e(
            "falcon_new_arch", "FalconForCausalLM", "FalconConfig", new_decoder_architecture=True, num_kv_heads=2,
            parallel_attn=True,
        ),
        e("falcon_alibi", "FalconForCausalLM", "FalconConfig", alibi=True, multi_query=False, num_kv_heads=4),
        e(
            "opt", "OPTForCausalLM", "OPTConfig", common=False, vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
            ffn_dim=112, num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=64, pad_token_id=0,
        ),
        e("bloom", "BloomForCausalLM", "BloomConfig", common=False, vocab_size=VOCAB, hidden_size=64, n_layer=2,
          n_head=4),
        e("gpt_neox", "GPTNeoXForCausalLM", "GPTNeoXConfig", rotary_pct=0.25, num_key_value_heads=4),
        e(
            "gptj", "GPTJForCausalLM", "GPTJConfig", common=False, vocab_size=VOCAB, n_positions=64, n_embd=64,
            n_layer=2, n_head=4, rotary_dim=8,
        ),
        e(
            "gpt_neo", "GPTNeoForCausalLM", "GPTNeoConfig", common=False, vocab_size=VOCAB, hidden_size=64,
            num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]], window_size=8,
            max_position_embeddings=64,
        ),
        e(
            "codegen", "CodeGenForCausalLM", "CodeGenConfig", common=False, vocab_size=VOCAB, n_positions=64,
            n_ctx=64, n_embd=64, n_layer=2, n_head=4, rotary_dim=8,
        ),
        e(
            "mpt", "MptForCausalLM", "MptConfig", common=False, vocab_size=VOCAB, d_model=64, n_heads=4, n_layers=2,
            max_seq_len=64,
        ),
        e("phi", "PhiForCausalLM", "PhiConfig", partial_rotary_factor=0.5, num_key_value_heads=4),
        e("stablelm", "StableLmForCausalLM", "StableLmConfig", partial_rotary_factor=0.25, use_qkv_bias=True),
        e("stablelm_qk_norm", "StableLmForCausalLM", "StableLmConfig", qk_layernorm=True, use_parallel_residual=True),
        e("starcoder2", "Starcoder2ForCausalLM", "Starcoder2Config", sliding_window=8),
        e("olmo", "OlmoForCausalLM", "OlmoConfig", clip_qkv=2.0),
        e("olmo2", "Olmo2ForCausalLM", "Olmo2Config"),
        e("cohere", "CohereForCausalLM", "CohereConfig", use_qk_norm=True),
        e("gemma", "GemmaForCausalLM", "GemmaConfig", head_dim=16),
        e(
            "qwen2_moe", "Qwen2MoeForCausalLM", "Qwen2MoeConfig", num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, shared_expert_intermediate_size=48,
        ),
        e("granite", "GraniteForCausalLM", "GraniteConfig", embedding_multiplier=2.0, logits_scaling=4.0),
        e("granitemoe", "GraniteMoeForCausalLM", "GraniteMoeConfig", num_local_experts=4, num_experts_per_tok=2),
        e("persimmon", "PersimmonForCausalLM", "PersimmonConfig", num_key_value_heads=4),
        e("nemotron", "NemotronForCausalLM", "NemotronConfig", head_dim=16),
        e("olmoe", "OlmoeForCausalLM", "OlmoeConfig", num_experts=4, num_experts_per_tok=2),
        e(
            "deepseek_v3", "DeepseekV3ForCausalLM", "DeepseekV3Config", num_key_value_heads=4,
            moe_intermediate_size=32, n_shared_experts=1, n_routed_experts=4, num_experts_per_tok=2, n_group=2,
            topk_group=1, first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8,
            qk_nope_head_dim=8, v_head_dim=16,
        ),
        e(
            "deepseek_v2", "DeepseekV2ForCausalLM", "DeepseekV2Config", num_key_value_heads=4,
            moe_intermediate_size=32, n_shared_experts=1, n_routed_experts=4, num_experts_per_tok=2,
            first_k_dense_replace=1, q_lora_rank=None, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8,
            v_head_dim=16,
        ),
        e("gpt_oss", "GptOssForCausalLM", "GptOssConfig", head_dim=16, num_local_experts=4, num_experts_per_tok=2,
          sliding_window=8, layer_types=["sliding_attention", "full_attention"]),
        e("cohere2", "Cohere2ForCausalLM", "Cohere2Config", sliding_window=8),
        e("helium", "HeliumForCausalLM", "HeliumConfig", head_dim=16),
        e("glm", "GlmForCausalLM", "GlmConfig", head_dim=16),
        e("smollm3", "SmolLM3ForCausalLM", "SmolLM3Config"),
        e("exaone4", "Exaone4ForCausalLM", "Exaone4Config", sliding_window=8),
        e(
            "mamba", "MambaForCausalLM", "MambaConfig", common=False, vocab_size=VOCAB, hidden_size=64, state_size=8,
            num_hidden_layers=2, expand=2, conv_kernel=4, time_step_rank=8, pad_token_id=0,
        ),
        e(
            "mamba2", "Mamba2ForCausalLM", "Mamba2Config", common=False, vocab_size=VOCAB, hidden_size=64,
            state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4, num_heads=8, head_dim=16, n_groups=1,
            chunk_size=8, pad_token_id=0,
        ),
        e(
            "recurrent_gemma", "RecurrentGemmaForCausalLM", "RecurrentGemmaConfig", common=False, vocab_size=VOCAB,
            hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
            lru_width=64, attention_window_size=8, block_types=["recurrent", "attention"], pad_token_id=0,
        ),
        Entry(
            "hf_phi_decode", "transformers", decode_step("PhiForCausalLM", "PhiConfig", partial_rotary_factor=0.5),
            decode=True,
        ),
        Entry("hf_olmo2_decode", "transformers", decode_step("Olmo2ForCausalLM", "Olmo2Config"), decode=True),
        Entry("hf_gemma_decode", "transformers", decode_step("GemmaForCausalLM", "GemmaConfig", head_dim=16),
              decode=True),
        Entry("hf_cohere_decode", "transformers", decode_step("CohereForCausalLM", "CohereConfig"), decode=True),
    ]


BERT_LIKE = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=112,
    max_position_embeddings=64,
)


def _hf_encoder_models() -> list[Entry]:
    def e(name: str, cls: str, cfg: str, **fields: Any) -> Entry:
        return Entry(f"hf_{name}", "transformers", encoder(cls, cfg, **fields))

    return [
        e("roberta", "RobertaModel", "RobertaConfig", **BERT_LIKE, pad_token_id=1),
        e("xlm_roberta", "XLMRobertaModel", "XLMRobertaConfig", **BERT_LIKE, pad_token_id=1),
        e("albert", "AlbertModel", "AlbertConfig", **BERT_LIKE, embedding_size=32),
        e("electra", "ElectraModel", "ElectraConfig", **BERT_LIKE, embedding_size=32),
        e(
            "deberta_v2", "DebertaV2Model", "DebertaV2Config", **BERT_LIKE, relative_attention=True,
            position_buckets=16, pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm", share_att_key=True,
            position_biased_input=False, max_relative_positions=32,
        ),
        e("deberta", "DebertaModel", "DebertaConfig", **BERT_LIKE, relative_attention=True,
          pos_att_type=["p2c", "c2p"]),
        e("mpnet", "MPNetModel", "MPNetConfig", **BERT_LIKE, relative_attention_num_buckets=32),
        e(
            "modernbert", "ModernBertModel", "ModernBertConfig", vocab_size=VOCAB, hidden_size=64,
            intermediate_size=112, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64,
            global_attn_every_n_layers=2, local_attention=8, pad_token_id=0,
        ),
        e(
            "funnel", "FunnelModel", "FunnelConfig", vocab_size=VOCAB, block_sizes=[1, 1], num_decoder_layers=1,
            d_model=64, n_head=4, d_head=16, d_inner=112,
        ),
        e("canine", "CanineModel", "CanineConfig", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
          intermediate_size=112, downsampling_rate=2, num_hash_buckets=64, local_transformer_stride=4),
        e(
            "xlnet", "XLNetModel", "XLNetConfig", vocab_size=VOCAB, d_model=64, n_layer=2, n_head=4, d_inner=112,
            pad_token_id=5,
        ),
    ]


def _hf_seq2seq_models() -> list[Entry]:
    bart = dict(
        vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=112, decoder_ffn_dim=112, max_position_embeddings=64,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
    )
    t5 = dict(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=112, num_layers=2, num_heads=4, decoder_start_token_id=0)
    return [
        Entry("hf_bart", "transformers", seq2seq("BartModel", "BartConfig", "last_hidden_state", **bart)),
        Entry("hf_mbart", "transformers", seq2seq("MBartModel", "MBartConfig", "last_hidden_state", **bart)),
        Entry("hf_pegasus", "transformers", seq2seq("PegasusModel", "PegasusConfig", "last_hidden_state", **bart)),
        Entry("hf_marian", "transformers", seq2seq("MarianMTModel", "MarianConfig", "logits", **bart)),
        Entry("hf_t5", "transformers", seq2seq("T5ForConditionalGeneration", "T5Config", "logits", **t5)),
        Entry(
            "hf_t5_gated_gelu",
            "transformers",
            seq2seq("T5ForConditionalGeneration", "T5Config", "logits", **t5, feed_forward_proj="gated-gelu"),
        ),
        Entry("hf_whisper_encoder", "transformers", hf_whisper(full=False)),
        Entry("hf_whisper", "transformers", hf_whisper(full=True)),
    ]


def _hf_vision_models() -> list[Entry]:
    vit = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=112, image_size=32)
    vit.update(patch_size=8)

    def e(name: str, cls: str, cfg: str, output: str = "last_hidden_state", size: int = 32, **fields: Any) -> Entry:
        return Entry(f"hf_{name}", "transformers", hf_pixels(cls, cfg, output, size, **fields))

    return [
        Entry("hf_clip", "transformers", hf_clip),
        Entry("hf_siglip", "transformers", hf_siglip),
        e("swin", "SwinModel", "SwinConfig", image_size=32, patch_size=2, embed_dim=16, depths=[2, 2],
          num_heads=[2, 4], window_size=4),
        e("swinv2", "Swinv2Model", "Swinv2Config", image_size=32, patch_size=2, embed_dim=16, depths=[2, 2],
          num_heads=[2, 4], window_size=4),
        e("convnext", "ConvNextModel", "ConvNextConfig", hidden_sizes=[16, 32], depths=[1, 1], num_stages=2),
        e("convnextv2", "ConvNextV2Model", "ConvNextV2Config", hidden_sizes=[16, 32], depths=[1, 1], num_stages=2),
        e("resnet", "ResNetModel", "ResNetConfig", embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1]),
        e("dinov2", "Dinov2Model", "Dinov2Config", size=32, **vit),
        e("dinov2_interpolated", "Dinov2Model", "Dinov2Config", size=40, **vit),
        e(
            "segformer", "SegformerForSemanticSegmentation", "SegformerConfig", output="logits", size=64,
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[7, 3],
            strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=32, num_labels=5,
        ),
        e("deit", "DeiTModel", "DeiTConfig", **vit),
        e("beit", "BeitModel", "BeitConfig", use_relative_position_bias=True, use_mean_pooling=True, **vit),
        e("mobilevit", "MobileViTModel", "MobileViTConfig", size=64, image_size=64),
        e("yolos", "YolosModel", "YolosConfig", size=32, num_detection_tokens=5, **{**vit, "image_size": [32, 32]}),
        e("efficientnet", "EfficientNetModel", "EfficientNetConfig", size=64, image_size=64, width_coefficient=1.0,
          depth_coefficient=1.0, hidden_dim=1280),
        e("levit", "LevitModel", "LevitConfig", size=64, image_size=64, hidden_sizes=[32, 48, 64],
          num_attention_heads=[1, 2, 2], depths=[1, 1, 1], key_dim=[8, 8, 8]),
        e("poolformer", "PoolFormerModel", "PoolFormerConfig", size=64, hidden_sizes=[16, 32, 48, 64],
          depths=[1, 1, 1, 1]),
        e("regnet", "RegNetModel", "RegNetConfig", size=64, embedding_size=16, hidden_sizes=[16, 32, 48, 64],
          depths=[1, 1, 1, 1], groups_width=8),
        e("mobilenet_v2", "MobileNetV2Model", "MobileNetV2Config", size=64, image_size=64, depth_multiplier=0.35),
        e("dpt", "DPTForDepthEstimation", "DPTConfig", output="predicted_depth", size=32,
          **{**vit, "num_hidden_layers": 4}, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[16, 32, 48, 64],
          fusion_hidden_size=32, head_hidden_size=16, initializer_range=0.1),  # initializer_range 0.02: outputs ~1e-8
        e("glpn", "GLPNForDepthEstimation", "GLPNConfig", output="predicted_depth", size=64, num_encoder_blocks=2,
          depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2],
          num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=16),
        Entry("hf_wav2vec2", "transformers", hf_audio(
            "Wav2Vec2Model", "Wav2Vec2Config", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=112, conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
        )),
        Entry("hf_hubert", "transformers", hf_audio(
            "HubertModel", "HubertConfig", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=112, conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
        )),
    ]


def _torchvision_models() -> list[Entry]:
    def e(name: str, size: int = 32, frames: int = 0, output: Any = None, **kwargs: Any) -> Entry:
        kwargs.setdefault("num_classes", 10)
        return Entry(f"tv_{name}", "torchvision", vision(tv(name, **kwargs), size, frames, output))

    def seg(name: str, size: int = 64, **kwargs: Any) -> Entry:
        make = tv_sub("segmentation", name, weights_backbone=None, num_classes=5, **kwargs)
        return Entry(f"tv_{name}", "torchvision", vision(make, size, output=lambda out: out["out"]))

    def video(name: str) -> Entry:
        return Entry(f"tv_{name}", "torchvision", vision(tv_sub("video", name, num_classes=10), 32, frames=4))

    return [
        e("densenet121"),
        e("vgg11_bn"),
        e("inception_v3", size=75, aux_logits=False, init_weights=False),
        e("googlenet", size=32, aux_logits=False, init_weights=False),
        e("shufflenet_v2_x0_5"),
        e("squeezenet1_1", size=64),
        e("mnasnet0_5"),
        e("efficientnet_v2_s"),
        e("mobilenet_v2"),
        e("mobilenet_v3_large"),
        e("regnet_x_400mf"),
        e("resnext50_32x4d"),
        e("wide_resnet50_2"),
        e("alexnet", size=64),
        Entry("tv_maxvit_small", "torchvision", vision(tv_small_maxvit, 64)),
        Entry("tv_vit_small_prelogits", "torchvision", vision(tv_small_vit, 48)),
        e("swin_v2_t", size=64),
        video("r3d_18"),
        video("r2plus1d_18"),
        video("mc3_18"),
        seg("fcn_resnet50", aux_loss=False),
        seg("deeplabv3_mobilenet_v3_large", aux_loss=False),
        seg("lraspp_mobilenet_v3_large"),
        Entry("tv_raft_small", "torchvision", tv_raft),
        Entry("tv_fasterrcnn_mobilenet_v3_320", "torchvision",
              tv_detection("fasterrcnn_mobilenet_v3_large_320_fpn", 64),
              note="detection: data-dependent ops expected to fall back"),
        Entry("tv_fasterrcnn_mobilenet_v3_320_heads", "torchvision",
              tv_detection("fasterrcnn_mobilenet_v3_large_320_fpn", 64, heads_only=True)),
        Entry("tv_ssdlite320_heads", "torchvision", tv_detection("ssdlite320_mobilenet_v3_large", 64, heads_only=True)),
        Entry("tv_ssdlite320", "torchvision", tv_detection("ssdlite320_mobilenet_v3_large", 64),
              note="detection: data-dependent ops expected to fall back"),
    ]


def _timm_models() -> list[Entry]:
    def e(name: str, size: int = 64, **kwargs: Any) -> Entry:
        return Entry(f"timm_{name}", "timm", vision(timm_model(name, **kwargs), size))

    vit_small = dict(img_size=32, depth=2)
    return [
        e("convnext_nano"),
        e("deit_tiny_patch16_224", size=32, **vit_small),
        e("beit_base_patch16_224", size=32, img_size=32, depth=2, embed_dim=64, num_heads=4),
        e("levit_128s", size=64, img_size=64),
        e("mobilevit_xxs"),
        e("efficientformer_l1", size=224),  # attention biases for 7x7 only
        e("efficientformerv2_s0", size=64, img_size=64),
        e("regnety_002"),
        e("resnest14d"),
        e("res2net50_14w_8s"),
        e("rexnet_100"),
        e("dla34"),
        e("hrnet_w18_small"),
        e("coatnet_nano_rw_224", size=64, img_size=64),
        e("maxvit_nano_rw_256", size=64, img_size=64),
        e("swin_tiny_patch4_window7_224", size=64, img_size=64, window_size=2, depths=(1, 1, 2, 1)),
        e("poolformer_s12"),
        e("ghostnet_100"),
        e("edgenext_xx_small"),
        e("fastvit_t8"),
        e("cait_xxs24_224", size=32, img_size=32, depth=2),
        e("xcit_nano_12_p16_224", size=32, img_size=32, depth=2),
        e("mixer_b16_224", size=32, img_size=32),
        e("resmlp_12_224", size=32, img_size=32),
        e("gmlp_ti16_224", size=32, img_size=32),
        e("pvt_v2_b0"),
        e("twins_svt_small", size=64, img_size=64, depths=(1, 1, 1, 1)),
        e("nfnet_l0"),
        e("eca_nfnet_l0"),
        e("regnetz_b16"),
        e("eva02_tiny_patch14_224", size=28, img_size=28, depth=2),
        e("vit_small_patch16_224", size=32, img_size=32, depth=2, reg_tokens=2, class_token=True),
        e("efficientvit_b0"),
        e("efficientvit_m0", size=64, img_size=64),
        e("tiny_vit_5m_224", size=64),
        e("repvit_m0_9"),
        e("mobileone_s0"),
        e("hgnetv2_b0"),
        e("inception_v4", size=75),
        e("xception41"),
        e("cspdarknet53"),
        e("volo_d1_224", size=64, img_size=64),
        e("tnt_s_patch16_224", size=32, img_size=32, depth=2),
        e("visformer_tiny", size=64, img_size=64),
        e("coat_lite_tiny", size=64, img_size=64),
        e("gcvit_xxtiny", size=64, img_size=64),
        e("davit_tiny", size=64, depths=(1, 1, 1, 1)),
        e("focalnet_tiny_srf", size=64),
        e("mvitv2_tiny", size=64, img_size=64),
        e("nest_tiny", size=32, img_size=32),
        e("convit_tiny", size=32, img_size=32, depth=2),
        e("mobilenetv4_conv_small"),
        e("lcnet_050"),
        e("selecsls42b"),
        e("dpn68"),
        e("vovnet39a"),
        e("tresnet_m"),
        e("resnetv2_50x1_bit"),
        e("mambaout_femto"),
        e("starnet_s1"),
        e("inception_next_tiny"),
        e("halonet26t", size=256, img_size=256),  # halo blocks of 8 need 8x8 features at stride 32
        e("botnet26t_256", size=64, img_size=64),
        e("lambda_resnet26t", size=64, img_size=64),
        e("sequencer2d_s", size=64, img_size=64, layers=(1, 1, 1, 1)),
        e("crossvit_tiny_240", size=240),
        e("convmixer_768_32", size=32),
    ]


def _more_hf_models() -> list[Entry]:
    """Less common architectures: rope scalings, local/sparse attention, convolutions in text
    models, FFT mixing, audio with relative position buckets, video, detection, super-resolution."""
    def c(name: str, cls: str, cfg: str, **fields: Any) -> Entry:
        return Entry(f"hf_{name}", "transformers", causal_lm(cls, cfg, **fields))

    def enc(name: str, cls: str, cfg: str, **fields: Any) -> Entry:
        return Entry(f"hf_{name}", "transformers", encoder(cls, cfg, **fields))

    def custom(name: str, cls: str, config: Callable[[], Any], inputs: Any, output: str = "last_hidden_state") -> Entry:
        return Entry(f"hf_{name}", "transformers", hf_custom(cls, config, inputs, output))

    wav = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=112,
               conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
               num_conv_pos_embedding_groups=4)
    vit = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=112)
    pixels = _named(pixel_values=_random(2, 3, 32, 32))
    return [
        c("llama_rope_linear", "LlamaForCausalLM", "LlamaConfig", rope_scaling={"rope_type": "linear", "factor": 2.0}),
        c("llama_rope_dynamic", "LlamaForCausalLM", "LlamaConfig", rope_scaling={"rope_type": "dynamic", "factor": 2.0},
          max_position_embeddings=8),
        c("llama_rope_yarn", "LlamaForCausalLM", "LlamaConfig", rope_scaling={"rope_type": "yarn", "factor": 4.0,
          "original_max_position_embeddings": 16}),
        c("llama3_rope", "LlamaForCausalLM", "LlamaConfig", rope_scaling={"rope_type": "llama3", "factor": 8.0,
          "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
        c("phi3_longrope", "Phi3ForCausalLM", "Phi3Config", max_position_embeddings=64,
          original_max_position_embeddings=8, rope_scaling={"type": "longrope", "short_factor": [1.0] * 8,
                                                            "long_factor": [2.0] * 8}),
        c("qwen2_sliding", "Qwen2ForCausalLM", "Qwen2Config", use_sliding_window=True, sliding_window=4,
          max_window_layers=0),
        c("gpt_bigcode", "GPTBigCodeForCausalLM", "GPTBigCodeConfig", common=False, vocab_size=VOCAB, n_embd=64,
          n_layer=2, n_head=4, n_positions=64, multi_query=True),
        c("biogpt", "BioGptForCausalLM", "BioGptConfig", common=False, vocab_size=VOCAB, hidden_size=64,
          num_hidden_layers=2, num_attention_heads=4, intermediate_size=112, max_position_embeddings=64),
        c("xglm", "XGLMForCausalLM", "XGLMConfig", common=False, vocab_size=VOCAB, d_model=64, num_layers=2,
          attention_heads=4, ffn_dim=112, max_position_embeddings=64),
        c("jamba", "JambaForCausalLM", "JambaConfig", attn_layer_period=2, attn_layer_offset=1,
          expert_layer_period=2, expert_layer_offset=1, num_experts=4, mamba_d_state=8, mamba_dt_rank=8,
          mamba_expand=2, use_mamba_kernels=False),
        enc("longformer", "LongformerModel", "LongformerConfig", **BERT_LIKE, attention_window=4, pad_token_id=1),
        enc("big_bird", "BigBirdModel", "BigBirdConfig", **BERT_LIKE, attention_type="block_sparse", block_size=2,
            num_random_blocks=1),
        enc("convbert", "ConvBertModel", "ConvBertConfig", **BERT_LIKE, embedding_size=32, conv_kernel_size=3,
            head_ratio=2),
        enc("squeezebert", "SqueezeBertModel", "SqueezeBertConfig", **BERT_LIKE, embedding_size=64, q_groups=2,
            k_groups=2, v_groups=2, post_attention_groups=2, intermediate_groups=2, output_groups=2),
        enc("fnet", "FNetModel", "FNetConfig", vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
            intermediate_size=112, max_position_embeddings=64, use_tpu_fourier_optimizations=False),
        enc("roformer", "RoFormerModel", "RoFormerConfig", **BERT_LIKE, embedding_size=64),
        enc("esm", "EsmModel", "EsmConfig", **BERT_LIKE, position_embedding_type="rotary", pad_token_id=1,
            mask_token_id=4, token_dropout=True),
        enc("mobilebert", "MobileBertModel", "MobileBertConfig", vocab_size=VOCAB, hidden_size=64,
            num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, embedding_size=32,
            intra_bottleneck_size=32, true_hidden_size=32, max_position_embeddings=64, num_feedforward_networks=2),
        Entry("hf_wavlm", "transformers", hf_audio("WavLMModel", "WavLMConfig", **wav, num_buckets=32,
                                                   max_bucket_distance=64)),
        Entry("hf_sew", "transformers", hf_audio("SEWModel", "SEWConfig", **wav, squeeze_factor=2)),
        Entry("hf_data2vec_audio", "transformers", hf_audio("Data2VecAudioModel", "Data2VecAudioConfig", **wav)),
        custom("encodec", "EncodecModel", _config("EncodecConfig", target_bandwidths=[1.5], audio_channels=1,
               hidden_size=32, num_filters=8, num_residual_layers=1, codebook_size=64, codebook_dim=32,
               num_lstm_layers=1), _named(input_values=_random(2, 1, 960)), output="audio_values"),
        custom("sam_vision", "SamVisionModel", _config("SamVisionConfig", **vit, image_size=64, patch_size=8,
               output_channels=32, window_size=4, global_attn_indexes=[1], mlp_dim=112),
               _named(pixel_values=_random(2, 3, 64, 64))),
        custom("vitdet", "VitDetModel", _config("VitDetConfig", **vit, mlp_ratio=2, image_size=32,
               pretrain_image_size=32, patch_size=8, window_size=2, window_block_indices=[0],
               use_relative_position_embeddings=True), pixels),
        custom("cvt", "CvtModel", _config("CvtConfig", embed_dim=[16, 32, 64], num_heads=[1, 2, 4], depth=[1, 2, 3]),
               _named(pixel_values=_random(2, 3, 64, 64))),
        custom("mobilevitv2", "MobileViTV2Model", _config("MobileViTV2Config", image_size=64, width_multiplier=0.5),
               _named(pixel_values=_random(2, 3, 64, 64))),
        custom("upernet", "UperNetForSemanticSegmentation", lambda: _hf_config(
               "UperNetConfig", backbone_config=_hf_config("ConvNextConfig", hidden_sizes=[16, 32, 48, 64],
               depths=[1, 1, 1, 1], out_features=["stage1", "stage2", "stage3", "stage4"]), hidden_size=32,
               use_auxiliary_head=False, num_labels=5), _named(pixel_values=_random(2, 3, 64, 64)), output="logits"),
        custom("detr", "DetrModel", lambda: _hf_config(
               "DetrConfig", use_timm_backbone=False, use_pretrained_backbone=False,
               backbone_config=_hf_config("ResNetConfig", embedding_size=16, hidden_sizes=[16, 32, 48, 64],
               depths=[1, 1, 1, 1], out_features=["stage4"]), d_model=64, encoder_layers=1, decoder_layers=1,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
               num_queries=10), _named(pixel_values=_random(2, 3, 64, 64))),
        custom("swin2sr", "Swin2SRForImageSuperResolution", _config("Swin2SRConfig", image_size=16, patch_size=1,
               embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4, upscale=2, upsampler="pixelshuffle"),
               _named(pixel_values=_random(2, 3, 16, 16)), output="reconstruction"),
        custom("depth_anything", "DepthAnythingForDepthEstimation", lambda: _hf_config(
               "DepthAnythingConfig", backbone_config=_hf_config("Dinov2Config", **vit, image_size=28, patch_size=14,
               out_features=["stage1", "stage2"], reshape_hidden_states=False), reassemble_hidden_size=64,
               reassemble_factors=[4, 2], neck_hidden_sizes=[16, 32], fusion_hidden_size=32, head_hidden_size=16,
               patch_size=14, initializer_range=0.1), _named(pixel_values=_random(2, 3, 42, 42)),
               output="predicted_depth"),
        custom("videomae", "VideoMAEModel", _config("VideoMAEConfig", **vit, image_size=32, patch_size=8,
               num_frames=4, tubelet_size=2), _named(pixel_values=_random(2, 4, 3, 32, 32))),
        custom("timesformer", "TimesformerModel", _config("TimesformerConfig", **vit, image_size=32, patch_size=8,
               num_frames=4), _named(pixel_values=_random(2, 4, 3, 32, 32))),
        custom("patchtst", "PatchTSTModel", _config("PatchTSTConfig", num_input_channels=3, context_length=32,
               patch_length=8, patch_stride=4, d_model=32, num_attention_heads=4, num_hidden_layers=2, ffn_dim=64),
               _named(past_values=_random(2, 32, 3))),
    ]


def _more_vision_models() -> list[Entry]:
    def e(name: str, size: int = 64, **kwargs: Any) -> Entry:
        return Entry(f"timm_{name}", "timm", vision(timm_model(name, **kwargs), size))

    def t(name: str, size: int = 32, **kwargs: Any) -> Entry:
        return Entry(f"tv_{name}", "torchvision", vision(tv(name, num_classes=10, **kwargs), size))

    small_vit = dict(size=32, img_size=32, depth=2)
    return [
        t("vit_b_32", image_size=32),
        t("efficientnet_b3"),
        t("regnet_y_800mf"),
        t("resnet152"),
        e("pit_ti_224", size=32, img_size=32),
        e("skresnet18"),
        e("mixnet_s"),
        e("tinynet_a"),
        e("deit3_small_patch16_224", **small_vit),
        e("vit_relpos_small_patch16_224", **small_vit),
        e("vit_base_patch16_siglip_224", **small_vit),
        e("beitv2_base_patch16_224", **small_vit),
        e("flexivit_small", size=32, img_size=32, depth=2, patch_size=8),
        e("samvit_base_patch16", size=64, img_size=64, depth=2),
        e("vit_medium_patch16_gap_256", **small_vit),
        e("resnet50_gn"),
        e("ghostnetv2_100"),
        e("repghostnet_050"),
        e("mobilevitv2_050"),
        e("hiera_tiny_224", size=64, img_size=64),
        e("convnextv2_atto"),
        e("nextvit_small"),
        e("efficientnetv2_rw_t"),
        e("rexnetr_100"),
        e("hardcorenas_a"),
        e("semnasnet_050"),
        e("gernet_s"),
        e("resnetrs50"),
        e("seresnext26d_32x4d"),
        e("ecaresnet26t"),
        e("res2next50"),
        e("regnetv_040"),
        e("caformer_s18"),
        e("levit_conv_128s", size=64, img_size=64),
        e("densenet121"),
    ]


# fmt: on


def registry() -> list[Entry]:
    return (
        _hf_causal_models()
        + _hf_encoder_models()
        + _hf_seq2seq_models()
        + _hf_vision_models()
        + (_torchvision_models() + _timm_models())
        + (_more_hf_models() + _more_vision_models())
    )
