"""bench/gpu.py's in-run peer: Hugging Face transformers' Qwen2 with a static KV cache and torch.compile on the
same shapes (random bf16 weights, batch 1, greedy), their documented fast path for decoding:
    model.generation_config.cache_implementation = "static"
    model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
Decode seconds per token = (generate(context, 1 + steps new tokens) - generate(context, 1 new token)) / steps, so
the prefill and the first token cancel out. The GPU machine reaches no package index: when transformers is not
importable, `decode_seconds` says so and bench/gpu.py prints the line instead of the peer's row.
"""
from __future__ import annotations

import statistics
import time

import torch

from runtime.config import ModelConfig


def unavailable() -> str | None:
    """Why the peer cannot run here, or None."""
    try:
        import transformers  # noqa: F401  (only asked whether it imports)
    except ImportError as e:
        return f"transformers is not importable ({e}); install it (pip install transformers) to get the peer's row"
    return None


def build(cfg: ModelConfig, device, *, compile_forward: bool = True):
    """The peer model: Qwen2ForCausalLM of cfg's shapes, random bf16 weights, static cache, compiled forward."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    hf = Qwen2Config(vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
                     num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
                     num_key_value_heads=cfg.num_kv_heads, max_position_embeddings=cfg.context_length,
                     rope_theta=cfg.rope_theta, rms_norm_eps=cfg.rms_eps, tie_word_embeddings=cfg.tie_embeddings)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(hf).to(torch.bfloat16).eval()
    model.generation_config.cache_implementation = "static"
    if compile_forward:
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    return model


def _generate_seconds(model, ids: torch.Tensor, new: int) -> float:
    if ids.is_cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                             do_sample=False, pad_token_id=0)
    if ids.is_cuda:
        torch.cuda.synchronize()
    assert out.shape[1] == ids.shape[1] + new, (out.shape, ids.shape, new)
    return time.perf_counter() - t0


def decode_seconds(cfg: ModelConfig, context: int, steps: int, reps: int, device, *,
                   compile_forward: bool = True) -> tuple[float | None, str]:
    """(seconds per decode step, note) or (None, why not)."""
    why = unavailable()
    if why:
        return None, why
    import transformers

    try:
        model = build(cfg, device, compile_forward=compile_forward)
        ids = torch.randint(0, cfg.vocab_size, (1, context), device=device)
        t0 = time.perf_counter()
        for new in (1, 1 + steps):  # compile (prefill and decode graphs) and warm up both lengths
            _generate_seconds(model, ids, new)
        warm = time.perf_counter() - t0
        short = statistics.median(_generate_seconds(model, ids, 1) for _ in range(reps))
        long = statistics.median(_generate_seconds(model, ids, 1 + steps) for _ in range(reps))
    except Exception as e:  # an API change in another transformers version: say so, keep our rows
        return None, f"transformers {transformers.__version__} failed: {type(e).__name__}: {str(e)[:160]}"
    how = "static cache + torch.compile" if compile_forward else "static cache, eager"
    if long <= short:
        return None, f"transformers {transformers.__version__}: {steps} more tokens took no measurable time; more --decode-steps"
    return (long - short) / steps, f"transformers {transformers.__version__}, {how}; warm-up {warm:.0f} s"
