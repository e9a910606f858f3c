"""runtime.model and runtime.weights: one forward for prefill/decode/verify, weight formats, vs llama.cpp."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from runtime.config import ModelConfig
from runtime.kv_cache import BranchKV, KVCache
from runtime.model import Qwen2Model, attention, branch_attention, random_gguf_tensors, random_q4k
from runtime.weights import (FORMAT_ID, Embedding, Int4Linear, Int8Linear, Linear, block_quantize, fuse_linears,
                             load_linear, prepare_tensor, q4k_to_int4)

TINY = ModelConfig(arch="qwen2", vocab_size=512, hidden_size=64, intermediate_size=256, num_layers=2,
                   num_heads=4, num_kv_heads=2, head_dim=16, context_length=256)
# Logits are O(10-70). fp32 reorderings of one computation differ by ~1e-5; the quantized model's matmuls give
# the same rows for any M (the kernel), and attention's T=1 and T>1 paths sum in different orders.
TOL = {"fp32": 1e-3, "quant": 1e-2}
ATOL = TOL["fp32"]


@pytest.fixture(scope="module", params=["fp32", "quant"])
def model(request) -> Qwen2Model:
    m = Qwen2Model.random(TINY, seed=0, fmt=request.param)
    m.atol = TOL[request.param]
    return m


def tokens(n: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, TINY.vocab_size, (n,), generator=torch.Generator().manual_seed(seed))


def run(model: Qwen2Model, toks: torch.Tensor, cache: KVCache | None = None, **kw) -> torch.Tensor:
    cache = KVCache(model.config) if cache is None else cache
    return model.forward(toks, torch.arange(cache.length, cache.length + len(toks)), cache, **kw)


def test_random_quant_model_uses_int8_and_exact_int4():
    m = Qwen2Model.random(TINY, seed=0)
    kinds = [(len(b.qkv), b.qkv[0].kind, len(b.gate_up), b.gate_up[0].kind, b.ffn_down.kind) for b in m.blocks]
    assert kinds == [(1, "int8", 1, "int8", "int4")] * 2  # fused q|k|v and gate|up; Q4_K ffn_down stays int4
    assert m.head.kind == "int8"


def test_prefill_then_decode_equals_one_full_forward(model):
    toks = tokens(24)
    full = run(model, toks)
    cache = KVCache(model.config)
    rows = [run(model, toks[:16], cache)] + [run(model, toks[i : i + 1], cache) for i in range(16, 24)]
    torch.testing.assert_close(torch.cat(rows), full, atol=model.atol, rtol=0)
    assert cache.tokens == toks.tolist()


def test_verify_of_k_tokens_equals_k_single_decodes(model):
    toks = tokens(20)
    a, b = KVCache(model.config), KVCache(model.config)
    run(model, toks[:12], a)
    run(model, toks[:12], b)
    verify = run(model, toks[12:20], a)
    singles = torch.cat([run(model, toks[i : i + 1], b) for i in range(12, 20)])
    torch.testing.assert_close(verify, singles, atol=model.atol, rtol=0)
    torch.testing.assert_close(a.k[:, :, :20], b.k[:, :, :20], atol=1e-4, rtol=0)


def test_a_batched_step_of_branches_equals_single_decodes_on_copies_of_the_prefix(model):
    """forward_branches: one matmul pass for every branch; the prefix is shared, only read."""
    toks = tokens(20)
    prefix = KVCache(model.config)
    run(model, toks, prefix)
    kv = BranchKV(prefix, 3, capacity=2)  # grows while the branches decode
    singles = [prefix.fork() for _ in range(3)]
    feed = torch.tensor([3, 77, 500])
    for _ in range(4):
        rows = model.forward_branches(feed, kv)
        single = torch.cat([run(model, feed[b : b + 1], c) for b, c in enumerate(singles)])
        torch.testing.assert_close(rows, single, atol=model.atol, rtol=0)
        feed = single.argmax(-1)
    for b, c in enumerate(singles):
        fed, k, v = kv.branch(b)
        assert fed == c.tokens[20:]
        torch.testing.assert_close(k, c.k[:, :, 20:24], atol=1e-4, rtol=0)
        torch.testing.assert_close(v, c.v[:, :, 20:24], atol=1e-4, rtol=0)
    assert prefix.tokens == toks.tolist()
    kv.select([2, 0])  # finished branches drop out; the others go on
    rows = model.forward_branches(feed[[2, 0]], kv)
    single = torch.cat([run(model, feed[b : b + 1], singles[b]) for b in (2, 0)])
    torch.testing.assert_close(rows, single, atol=model.atol, rtol=0)


def test_branch_attention_equals_attention_over_each_branchs_whole_sequence():
    g = torch.Generator().manual_seed(0)
    B, H, n_kv, d, P, S = 3, 6, 2, 16, 9, 4
    q = torch.randn(B, H, d, generator=g)
    kp, vp = torch.randn(n_kv, P, d, generator=g), torch.randn(n_kv, P, d, generator=g)
    ks, vs = torch.randn(B, n_kv, S, d, generator=g), torch.randn(B, n_kv, S, d, generator=g)
    out = branch_attention(q, kp, vp, ks, vs)
    for b in range(B):  # the query sits at the last position of its sequence: it sees every key
        ref = attention(q[b : b + 1], torch.cat([kp, ks[b]], 1), torch.cat([vp, vs[b]], 1), None)
        torch.testing.assert_close(out[b : b + 1], ref, atol=1e-5, rtol=0)


def test_chunked_prefill_equals_one_pass_and_last_only_is_the_last_row(model):
    toks = tokens(30)
    full = run(model, toks)
    chunked = Qwen2Model(model.config, model.embed, model.blocks, model.output_norm, model.head)
    chunked.prefill_chunk = 7
    torch.testing.assert_close(run(chunked, toks), full, atol=model.atol, rtol=0)
    torch.testing.assert_close(run(chunked, toks, last_only=True), full[-1:], atol=model.atol, rtol=0)


def test_interrupted_forward_leaves_the_cache_as_it_was(model):
    toks = tokens(12)
    cache = KVCache(model.config)
    run(model, toks[:8], cache)
    blk = model.blocks[1]
    good = blk.attn_norm
    blk.attn_norm = torch.ones(3)  # layer 1 fails after layer 0 wrote K/V past the cache's length
    try:
        with pytest.raises(RuntimeError):
            run(model, toks[8:], cache)
    finally:
        blk.attn_norm = good
    assert cache.tokens == toks[:8].tolist()
    torch.testing.assert_close(run(model, toks[8:], cache), run(model, toks)[8:], atol=model.atol, rtol=0)


def test_forward_must_continue_the_cache(model):
    cache = KVCache(model.config)
    run(model, tokens(4), cache)
    with pytest.raises(AssertionError):
        model.forward(tokens(2), torch.arange(2, 4), cache)


def test_quantized_model_stays_close_to_fp32():
    toks = tokens(40)
    ref = run(Qwen2Model.random(TINY, seed=0, fmt="fp32"), toks)
    q = run(Qwen2Model.random(TINY, seed=0, fmt="quant"), toks)
    # int8 per-channel weights: logit error a few percent of the logit range, same argmax almost always
    assert float((q - ref).abs().max()) < 0.05 * float(ref.abs().max())
    assert float((q.argmax(-1) == ref.argmax(-1)).float().mean()) >= 0.9


def test_interleaved_rope_on_permuted_weights_equals_neox_rope():
    """llama GGUFs permute q/k rows so GPT-J-style RoPE reproduces the original NeoX-style model."""
    neox = dataclasses.replace(TINY, arch="llama", qkv_bias=False)
    tensors = {name: w for name, (w, _) in random_gguf_tensors(neox, 5).items()}
    permuted = dict(tensors)
    for i in range(neox.num_layers):
        for x, heads in (("q", neox.num_heads), ("k", neox.num_kv_heads)):
            w = tensors[f"blk.{i}.attn_{x}.weight"]  # rows (heads, 2 halves, head_dim/2) -> (heads, head_dim/2, 2)
            permuted[f"blk.{i}.attn_{x}.weight"] = w.reshape(heads, 2, neox.head_dim // 2, -1).transpose(1, 2).reshape(w.shape)
    toks = tokens(10)
    a = run(Qwen2Model.from_tensors(neox, tensors), toks)
    b = run(Qwen2Model.from_tensors(dataclasses.replace(neox, rope_interleaved=True), permuted), toks)
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


# --- weight formats ----------------------------------------------------------------------------

def test_int8_matmul_error_is_bounded_by_the_two_roundings():
    g = torch.Generator().manual_seed(0)
    w, x = torch.randn(96, 256, generator=g) * 0.05, torch.randn(5, 256, generator=g) * 3
    x[:, 7] = 60.0  # an outlier channel, as real activations have
    lin = load_linear(prepare_tensor("blk.0.ffn_up.weight", w, "Q5_0"), "blk.0.ffn_up.weight")
    assert isinstance(lin, Int8Linear)
    y = lin.matmul(x)
    exact_for_int8_weights = x @ lin.dequantize().t()
    # activations are rounded per block of 32 (half a step of max|block| / 127 at most): the outlier channel
    # costs precision only in its own block
    bound = (x - block_quantize(x)).abs() @ lin.dequantize().abs().t()
    assert ((y - exact_for_int8_weights).abs() <= bound * 1.01 + 1e-4).all()
    weight_part = x.abs() @ (w - lin.dequantize()).abs().t()  # against the fp32 weight: plus the weights' rounding
    assert ((y - x @ w.t()).abs() <= (bound + weight_part) * 1.01 + 1e-4).all()
    torch.testing.assert_close(lin.matmul(x[2:3]), y[2:3], atol=0, rtol=0)  # rows are computed independently


def test_q4k_weight_becomes_exact_int4():
    w = random_q4k(128, 512, torch.Generator().manual_seed(0))
    stored = prepare_tensor("blk.0.ffn_down.weight", w, "Q4_K")
    assert sorted(stored) == ["blk.0.ffn_down.weight.q4", "blk.0.ffn_down.weight.q4_sz"]
    lin = load_linear(stored, "blk.0.ffn_down.weight")
    assert isinstance(lin, Int4Linear)
    assert float((lin.dequantize() - w).abs().max()) <= 1e-6 * float(w.abs().max())
    x = torch.randn(3, 512, generator=torch.Generator().manual_seed(1))
    ref = x @ w.t()
    assert float((lin.matmul(x) - ref).abs().max()) < 1e-2 * float(ref.abs().max())  # bf16 activations


def test_q4k_label_on_a_non_q4k_weight_falls_back_to_int8():
    w = torch.randn(64, 256, generator=torch.Generator().manual_seed(0))
    assert q4k_to_int4(w) is None
    assert sorted(prepare_tensor("blk.0.ffn_down.weight", w, "Q4_K")) == ["blk.0.ffn_down.weight.q8", "blk.0.ffn_down.weight.q8_scale"]


def test_prepare_tensor_keeps_vectors_and_fp32_format():
    v, w = torch.randn(8), torch.randn(16, 32)
    assert prepare_tensor("blk.0.attn_q.bias", v, "F32").keys() == {"blk.0.attn_q.bias"}
    torch.testing.assert_close(prepare_tensor("blk.0.attn_q.weight", w, "Q8_0", fmt="fp32")["blk.0.attn_q.weight"], w)
    assert FORMAT_ID and isinstance(FORMAT_ID, str)


def test_fused_linears_equal_separate_ones():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 256, generator=g)
    for ggml_type, make in (("Q5_0", lambda n: torch.randn(n, 256, generator=g)), ("Q4_K", lambda n: random_q4k(n, 256, g))):
        parts = []
        for i, n in enumerate((64, 128)):
            name = f"w{i}"
            parts.append(load_linear(prepare_tensor(name, make(n), ggml_type), name, bias=torch.randn(n, generator=g)))
        fused = fuse_linears(parts)
        assert len(fused) == 1 and fused[0].kind == parts[0].kind
        torch.testing.assert_close(fused[0].matmul(x), torch.cat([p.matmul(x) for p in parts], 1), atol=1e-5, rtol=0)
    mixed = [Linear(torch.randn(16, 256)), parts[0]]
    assert fuse_linears(mixed) == mixed


@pytest.mark.parametrize("ggml_type", ["Q5_0", "Q4_K", "Q8_0"])
def test_fused_tensors_are_concatenated_at_first_use(ggml_type):
    from gguf import GGMLQuantizationType as T
    from gguf.quants import dequantize, quantize

    g = torch.Generator().manual_seed(1)

    def make(n: int) -> torch.Tensor:  # a weight that is exactly one of its GGUF type
        if ggml_type == "Q4_K":
            return random_q4k(n, 256, g)
        w = torch.randn(n, 256, generator=g).numpy()
        return torch.from_numpy(dequantize(quantize(w, T[ggml_type]), T[ggml_type]).copy())
    parts = [load_linear(prepare_tensor(f"w{i}", make(n), ggml_type), f"w{i}") for i, n in enumerate((64, 128))]
    fused = fuse_linears(parts)[0]
    assert "_unfused" in fused.__dict__ and (fused.out_features, fused.in_features) == (192, 256)
    q5_rows = list(getattr(fused, "q5_rows", []))
    made = fused.parts()  # the first use concatenates, once
    assert "_unfused" not in fused.__dict__ and fused.parts()[0] is made[0]
    for i, d in enumerate(fused.cat_dims):
        assert torch.equal(made[i], torch.cat([p.parts()[i] for p in parts], dim=d))
    assert getattr(fused, "q5_rows", []) == q5_rows and (ggml_type != "Q5_0" or len(q5_rows) == 2)
    with pytest.raises(AttributeError):
        fused.no_such_attribute


def test_embedding_dequantizes_only_the_looked_up_rows():
    w = torch.randn(50, 16, generator=torch.Generator().manual_seed(0))
    stored = prepare_tensor("token_embd.weight", w, "Q4_K")  # the embedding stays int8 whatever its GGUF type
    emb = Embedding(stored)
    ids = torch.tensor([3, 3, 49, 0])
    torch.testing.assert_close(emb(ids), load_linear(stored, "token_embd.weight").dequantize()[ids])
    assert float((emb(ids) - w[ids]).abs().max()) <= float(w.abs().max()) / 254 + 1e-6


# --- the reference: llama.cpp on the same weights ---------------------------------------------

def write_gguf(path, config: ModelConfig, seed: int) -> None:
    """The random model as an F32 GGUF llama.cpp can load (byte tokens + filler; one merge, which it requires)."""
    import gguf

    from runtime.tokenizer import gpt2_byte_decoder

    w = gguf.GGUFWriter(str(path), config.arch)
    w.add_block_count(config.num_layers)
    w.add_context_length(config.context_length)
    w.add_embedding_length(config.hidden_size)
    w.add_feed_forward_length(config.intermediate_size)
    w.add_head_count(config.num_heads)
    w.add_head_count_kv(config.num_kv_heads)
    w.add_key_length(config.head_dim)
    w.add_value_length(config.head_dim)
    w.add_rope_freq_base(config.rope_theta)
    w.add_layer_norm_rms_eps(config.rms_eps)
    by_byte = {b: c for c, b in gpt2_byte_decoder().items()}
    vocab = [by_byte[b] for b in range(256)] + [f"<extra{i}>" for i in range(config.vocab_size - 256)]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(vocab)
    w.add_token_types([1] * len(vocab))
    w.add_token_merges(["Ġ Ġ"])
    for name, (tensor, _) in random_gguf_tensors(config, seed).items():
        w.add_tensor(name, tensor.numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("arch, changes", [
    ("qwen2", {}),
    ("llama", {"qkv_bias": False, "rope_interleaved": True, "rope_theta": 10000.0}),
    ("qwen3", {"qkv_bias": False, "qk_norm": True, "head_dim": 32}),  # head_dim != hidden / heads
])
def test_logits_match_llama_cpp(tmp_path, arch, changes):
    llama_cpp = pytest.importorskip("llama_cpp")
    config = dataclasses.replace(TINY, arch=arch, **changes)
    write_gguf(tmp_path / "m.gguf", config, seed=3)
    ids = tokens(40).tolist()
    ours = run(Qwen2Model.random(config, seed=3, fmt="fp32"), torch.tensor(ids))
    llm = llama_cpp.Llama(model_path=str(tmp_path / "m.gguf"), n_ctx=128, logits_all=True, n_threads=2, verbose=False)
    llm.eval(ids)
    ref = torch.tensor(np.array(llm.scores[: len(ids)]))
    # llama.cpp keeps K/V in fp16: ~1e-4 of the logit range apart
    assert float((ours - ref).abs().max()) < 1e-3 * float(ref.abs().max())
    assert ours.argmax(-1).tolist() == ref.argmax(-1).tolist()


@pytest.mark.slow
def test_real_model_agrees_with_llama_cpp(small_gguf_path, llama_cpp_model):
    """The real 0.5B in the default weight format vs llama.cpp on the same GGUF: same next-token choices."""
    llama_cpp = llama_cpp_model
    from runtime.gguf_loader import load_model_files
    from runtime.tokenizer import Tokenizer

    loaded = load_model_files(small_gguf_path, prepare_tensor, FORMAT_ID)
    model = Qwen2Model.from_tensors(loaded.config, loaded.tensors)
    text = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n"
    ids = Tokenizer.from_gguf_data(loaded.tokenizer_data).encode(text * 3)
    ours = run(model, torch.tensor(ids))
    llm = llama_cpp.Llama(model_path=str(small_gguf_path), n_ctx=512, logits_all=True, n_threads=2, verbose=False)
    llm.eval(ids)
    ref = torch.tensor(np.array(llm.scores[: len(ids)]))
    log_p, log_q = torch.log_softmax(ref.double(), -1), torch.log_softmax(ours.double(), -1)
    kl = (log_p.exp() * (log_p - log_q)).sum(-1)
    assert float(kl.mean()) < 0.02  # measured ~0.002; int8 re-quantization of Q5_0 vs llama.cpp's own kernels
    assert float((ours.argmax(-1) == ref.argmax(-1)).float().mean()) >= 0.9
