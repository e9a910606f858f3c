"""Qwen2 (and llama / qwen3) forward pass in eager torch: one code path for prefill, decode, verify and batched branches."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from runtime import cpu_kernels
from runtime.config import ModelConfig
from runtime.kv_cache import BranchKV, KVCache
from runtime.weights import Embedding, Linear, fuse_linears, load_linear, prepare_tensor


@dataclass
class Block:
    attn_norm: torch.Tensor
    qkv: list[Linear]  # one fused q|k|v projection, or three when their formats differ
    attn_output: Linear
    ffn_norm: torch.Tensor
    gate_up: list[Linear]  # one fused gate|up projection, or two
    ffn_down: Linear
    q_norm: torch.Tensor | None = None  # qwen3: per-head RMSNorm weights (head_dim,)
    k_norm: torch.Tensor | None = None


class Qwen2Model:
    """forward(tokens, positions, cache) -> logits; fp32 activations, weights in any runtime.weights format."""

    prefill_chunk = 256  # longer inputs run in chunks of this many tokens to bound attention memory

    def __init__(self, config: ModelConfig, embed: Embedding, blocks: list[Block], output_norm: torch.Tensor, head: Linear):
        self.config, self.embed, self.blocks, self.output_norm, self.head = config, embed, blocks, output_norm, head
        half = config.head_dim // 2
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(half, dtype=torch.float64) / half))
        angles = torch.outer(torch.arange(config.context_length, dtype=torch.float64), inv_freq)
        self.rope_cos, self.rope_sin = angles.cos().float(), angles.sin().float()  # (context, head_dim/2)

    @classmethod
    def from_tensors(cls, config: ModelConfig, tensors: dict[str, torch.Tensor]) -> "Qwen2Model":
        """Build from the dict of prepare_tensor outputs (GGUF tensor names)."""
        blocks = []
        for i in range(config.num_layers):
            p = f"blk.{i}."
            bias = {x: tensors[f"{p}attn_{x}.bias"] if config.qkv_bias else None for x in "qkv"}
            blocks.append(Block(
                attn_norm=tensors[p + "attn_norm.weight"],
                qkv=fuse_linears([load_linear(tensors, f"{p}attn_{x}.weight", bias[x]) for x in "qkv"]),
                attn_output=load_linear(tensors, p + "attn_output.weight"),
                ffn_norm=tensors[p + "ffn_norm.weight"],
                gate_up=fuse_linears([load_linear(tensors, p + "ffn_gate.weight"), load_linear(tensors, p + "ffn_up.weight")]),
                ffn_down=load_linear(tensors, p + "ffn_down.weight"),
                q_norm=tensors[p + "attn_q_norm.weight"] if config.qk_norm else None,
                k_norm=tensors[p + "attn_k_norm.weight"] if config.qk_norm else None,
            ))
        head_name = "token_embd.weight" if config.tie_embeddings else "output.weight"
        return cls(config, Embedding(tensors), blocks, tensors["output_norm.weight"], load_linear(tensors, head_name))

    @classmethod
    def random(cls, config: ModelConfig, seed: int = 0, fmt: str = "quant") -> "Qwen2Model":
        """Random weights put through prepare_tensor (same underlying values for fmt "quant" and "fp32")."""
        tensors: dict[str, torch.Tensor] = {}
        for name, (weight, ggml_type) in random_gguf_tensors(config, seed).items():
            tensors.update(prepare_tensor(name, weight, ggml_type, fmt=fmt))
        return cls.from_tensors(config, tensors)

    @torch.no_grad()  # not inference_mode: callers may edit the logits and cache in place afterwards
    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache, *, last_only: bool = False) -> torch.Tensor:
        """tokens, positions (T,) -> logits (T, vocab), or (1, vocab) with last_only.

        Writes K/V for the T new positions (which must continue the cache: positions[0] == cache.length)
        and attends causally over the cached prefix plus the new block; the cache grows by T tokens.
        """
        T = tokens.shape[0]
        assert T > 0 and positions.shape == (T,) and int(positions[0]) == cache.length, (T, positions[:1], cache.length)
        if T > self.prefill_chunk:
            outs = [self.forward(tokens[i : i + self.prefill_chunk], positions[i : i + self.prefill_chunk], cache, last_only=last_only)
                    for i in range(0, T, self.prefill_chunk)]
            return outs[-1] if last_only else torch.cat(outs)
        start, end = cache.length, cache.length + T
        cache.reserve(end)
        # Query i sits at position start+i and may see keys 0..start+i; a single query sees everything.
        mask = None if T == 1 else torch.arange(end)[None, :] <= positions[:, None]  # (T, end)

        def attend(i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            cache.k[i, :, start:end] = k.transpose(0, 1)  # (kv_heads, T, head_dim)
            cache.v[i, :, start:end] = v.transpose(0, 1)
            return attention(q, cache.k[i, :, :end], cache.v[i, :, :end], mask, start)

        x = self._layers(tokens, positions, attend)
        cache.append(tokens.tolist())  # every layer's K/V for these positions is written: commit them
        if last_only:
            x = x[-1:]
        return self.head.matmul(rms_norm(x, self.output_norm, self.config.rms_eps))

    @torch.no_grad()
    def forward_branches(self, tokens: torch.Tensor, kv: BranchKV) -> torch.Tensor:
        """tokens (B,): the next token of each of kv's B branches -> logits (B, vocab); each branch grows by one.

        The matmuls run on the B rows together (each weight is read once per step: about the cost of one decode
        step); attention reads the shared prefix once for every branch's queries, then each branch's own positions.
        Row b equals decoding branch b alone on a copy of the prefix, to fp32 rounding (attention sums in another
        order)."""
        B, P, n = tokens.shape[0], kv.start, kv.length
        assert B == kv.n and kv.prefix.length >= P, (B, kv.n, kv.prefix.length, P)
        kv.reserve(n + 1)
        prefix = kv.prefix

        def attend(i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            kv.k[i, :, :, n] = k  # (B, kv_heads, head_dim)
            kv.v[i, :, :, n] = v
            return branch_attention(q, prefix.k[i, :, :P], prefix.v[i, :, :P], kv.k[i, :, :, : n + 1], kv.v[i, :, :, : n + 1])

        x = self._layers(tokens, torch.full((B,), P + n), attend)
        kv.append(tokens.tolist())
        return self.head.matmul(rms_norm(x, self.output_norm, self.config.rms_eps))

    def _layers(self, tokens: torch.Tensor, positions: torch.Tensor, attend) -> torch.Tensor:
        """The transformer blocks over T rows -> hidden states (T, hidden) before the output norm.

        attend(layer, q (T, heads, hd), k (T, kv_heads, hd), v (T, kv_heads, hd)) stores K/V where the rows' caches
        keep them and returns attention's output (T, heads * hd)."""
        cfg = self.config
        T = tokens.shape[0]
        cos, sin = self.rope_cos[positions], self.rope_sin[positions]  # (T, head_dim/2)
        rot = rope_tables(cos, sin, cfg.rope_interleaved)  # once per forward, shared by every layer's q and k
        x = self.embed(tokens)  # (T, hidden)
        nq, nkv, hd = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        for i, blk in enumerate(self.blocks):
            h = rms_norm(x, blk.attn_norm, cfg.rms_eps)
            qkv = torch.cat([lin.matmul(h) for lin in blk.qkv], dim=1) if len(blk.qkv) > 1 else blk.qkv[0].matmul(h)
            v = qkv[:, (nq + nkv) * hd:].view(T, nkv, hd)
            if blk.q_norm is None:  # q and k rotated in one go (a view of qkv's first columns)
                qk = rope(qkv[:, : (nq + nkv) * hd].view(T, nq + nkv, hd), rot)
                q, k = qk[:, :nq], qk[:, nq:]
            else:
                q, k = qkv[:, : nq * hd].view(T, nq, hd), qkv[:, nq * hd : (nq + nkv) * hd].view(T, nkv, hd)
                q, k = rms_norm(q, blk.q_norm, cfg.rms_eps), rms_norm(k, blk.k_norm, cfg.rms_eps)
                q, k = rope(q, rot), rope(k, rot)
            x = x + blk.attn_output.matmul(attend(i, q, k, v))
            h = rms_norm(x, blk.ffn_norm, cfg.rms_eps)
            gu = torch.cat([lin.matmul(h) for lin in blk.gate_up], dim=1) if len(blk.gate_up) > 1 else blk.gate_up[0].matmul(h)
            gate, up = gu.chunk(2, dim=1)
            x = x + blk.ffn_down.matmul(F.silu(gate).mul_(up))
        return x


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Rows of hidden states (T, hidden) in our kernel where it runs (torch's call costs more than the arithmetic
    on a decode step's one row); anything else (q/k norms over heads, other dtypes) in torch."""
    if x.dim() == 2 and x.dtype == weight.dtype == torch.float32 and x.stride(1) == 1 and weight.shape == x.shape[1:] \
            and weight.is_contiguous():
        kern = cpu_kernels.kernel()
        if kern is not None and kern.isa >= 1:
            return kern.rms_norm(x, weight, eps)
    return F.rms_norm(x, weight.shape, weight, eps)


def rope_tables(cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> tuple:
    """Per-forward tables for rope(): cos/sin (T, head_dim/2) -> (cos, signed sin) (T, 1, head_dim), interleaved."""
    if interleaved:
        c = torch.stack([cos, cos], -1).flatten(-2)
        s = torch.stack([-sin, sin], -1).flatten(-2)
    else:
        c, s = torch.cat([cos, cos], -1), torch.cat([-sin, sin], -1)
    return c[:, None, :], s[:, None, :], interleaved


def rope(x: torch.Tensor, tables: tuple) -> torch.Tensor:
    """x (T, heads, head_dim) rotated by per-position angles (tables from rope_tables).

    NeoX style (the two halves of each head): (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin);
    interleaved (GPT-J style, pairs (0,1), (2,3), ...; llama GGUFs store q/k permuted for this): the same per pair."""
    c, s, interleaved = tables
    if interleaved:
        swapped = x.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)  # (x1, x0, x3, x2, ...)
    else:
        half = x.shape[-1] // 2
        swapped = torch.cat([x[..., half:], x[..., :half]], -1)
    return torch.addcmul(x * c, swapped, s)


ROW_ATTENTION_MAX_T = 16  # decode and verify rows: our kernel's row-by-row attention (bit-identical for any T)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, start: int | None = None) -> torch.Tensor:
    """q (T, heads, d); k, v (kv_heads, S, d) -> (T, heads * d); query i sits at position start + i (S - T by default).

    Up to ROW_ATTENTION_MAX_T rows run in runtime/cpu_kernels' attention when it is built for AVX-512 or AVX2 and
    everything is fp32: each row alone, so a verify pass's rows equal single decodes bit for bit (the kernel's matmul
    rows already do). Longer inputs (prefill chunks), and machines with neither (the kernel's portable attention is
    slower than SDPA at long contexts), use torch's SDPA: there verify rows equal decodes to fp32 rounding."""
    T, n_heads, d = q.shape
    if T <= ROW_ATTENTION_MAX_T and q.dtype == k.dtype == torch.float32 and q.stride(1) == d and q.stride(2) == 1:
        kern = cpu_kernels.kernel()
        if kern is not None and kern.isa >= 1:
            return kern.attention(q, k, v, k.shape[1] - T if start is None else start)
    n_kv = k.shape[0]
    k, v = k.to(q.dtype)[None], v.to(q.dtype)[None]  # (1, kv_heads, S, d)
    if T == 1:
        # Decode: fold each kv head's group of query heads into the query dim (no mask, no repeat).
        out = F.scaled_dot_product_attention(q.view(1, n_kv, n_heads // n_kv, d), k, v)
    else:
        out = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k, v, attn_mask=mask, enable_gqa=True)
    return out.view(n_heads, T, d).transpose(0, 1).reshape(T, n_heads * d)


def branch_attention(q: torch.Tensor, kp: torch.Tensor, vp: torch.Tensor, ks: torch.Tensor, vs: torch.Tensor) -> torch.Tensor:
    """One query per branch over a shared prefix plus the branch's own keys -> (B, heads * d).

    q (B, heads, d); prefix kp, vp (kv_heads, P, d); own ks, vs (B, kv_heads, S, d). Per kv head, the queries of every
    branch and head of its group meet the prefix in one matmul (each prefix key is read once for all branches); the
    softmax spans the prefix's and the branch's own scores (one max, one sum), with no copy of the prefix's scores."""
    B, n_heads, d = q.shape
    n_kv = kp.shape[0]
    G = n_heads // n_kv  # head h uses kv head h // G
    kp, vp, ks, vs = kp.to(q.dtype), vp.to(q.dtype), ks.to(q.dtype), vs.to(q.dtype)
    qp = (q * d ** -0.5).view(B, n_kv, G, d).transpose(0, 1).reshape(n_kv, B * G, d)
    sp = torch.bmm(qp, kp.transpose(1, 2))  # (kv_heads, B * G, P)
    ss = torch.matmul(qp.view(n_kv, B, G, d).transpose(0, 1), ks.transpose(2, 3))  # (B, kv_heads, G, S)
    ss = ss.transpose(0, 1).reshape(n_kv, B * G, -1)
    m = torch.maximum(sp.amax(-1, keepdim=True), ss.amax(-1, keepdim=True))
    ep, es = sp.sub_(m).exp_(), ss.sub_(m).exp_()
    own = torch.matmul(es.view(n_kv, B, G, -1).transpose(0, 1), vs).transpose(0, 1).reshape(n_kv, B * G, d)
    out = (torch.bmm(ep, vp) + own).div_(ep.sum(-1, keepdim=True) + es.sum(-1, keepdim=True))
    return out.view(n_kv, B, G, d).transpose(0, 1).reshape(B, n_heads * d)


def random_gguf_tensors(config: ModelConfig, seed: int) -> dict[str, tuple[torch.Tensor, str]]:
    """GGUF-named random fp32 tensors + the ggml type they pose as; ffn_down is a real Q4_K when it can be."""
    g = torch.Generator().manual_seed(seed)
    c = config
    hd, nq, nkv = c.head_dim, c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim

    def randn(*shape, std=0.02):
        return torch.randn(*shape, generator=g) * std

    def norm(n):
        return 1.0 + randn(n, std=0.1)

    t: dict[str, tuple[torch.Tensor, str]] = {
        "token_embd.weight": (randn(c.vocab_size, c.hidden_size, std=1.0), "Q8_0"),
        "output_norm.weight": (norm(c.hidden_size), "F32"),
    }
    if not c.tie_embeddings:
        t["output.weight"] = (randn(c.vocab_size, c.hidden_size, std=1.0), "Q8_0")
    for i in range(c.num_layers):
        p = f"blk.{i}."
        t[p + "attn_norm.weight"] = (norm(c.hidden_size), "F32")
        t[p + "ffn_norm.weight"] = (norm(c.hidden_size), "F32")
        for x, n in (("q", nq), ("k", nkv), ("v", nkv)):
            t[f"{p}attn_{x}.weight"] = (randn(n, c.hidden_size, std=0.1), "Q5_0")
            if c.qkv_bias:
                t[f"{p}attn_{x}.bias"] = (randn(n, std=0.1), "F32")
        if c.qk_norm:
            t[p + "attn_q_norm.weight"] = (norm(hd), "F32")
            t[p + "attn_k_norm.weight"] = (norm(hd), "F32")
        t[p + "attn_output.weight"] = (randn(c.hidden_size, nq, std=0.1), "Q5_0")
        t[p + "ffn_gate.weight"] = (randn(c.intermediate_size, c.hidden_size, std=0.1), "Q5_0")
        t[p + "ffn_up.weight"] = (randn(c.intermediate_size, c.hidden_size, std=0.1), "Q5_0")
        if c.intermediate_size % 256 == 0:
            t[p + "ffn_down.weight"] = (random_q4k(c.hidden_size, c.intermediate_size, g), "Q4_K")
        else:
            t[p + "ffn_down.weight"] = (randn(c.hidden_size, c.intermediate_size, std=0.1), "Q5_0")
    return t


def random_q4k(out_features: int, in_features: int, g: torch.Generator) -> torch.Tensor:
    """A random weight that is exactly a Q4_K tensor: random blocks dequantized by gguf itself."""
    from gguf import GGMLQuantizationType, quants

    n_blocks = out_features * in_features // 256
    raw = torch.randint(0, 256, (n_blocks, 144), generator=g, dtype=torch.uint8).numpy()
    d = (torch.rand(n_blocks, generator=g) * 2e-4 + 2e-4).numpy().astype(np.float16)
    dmin = (d.astype(np.float32) * 7.5).astype(np.float16)  # centres d*sc*q - dmin*m near zero
    raw[:, 0:2] = d.view(np.uint8).reshape(n_blocks, 2)
    raw[:, 2:4] = dmin.view(np.uint8).reshape(n_blocks, 2)
    w = quants.dequantize(raw.reshape(out_features, -1), GGMLQuantizationType.Q4_K)
    return torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32))
