"""Decode / verify attention kernels vs the fp32 torch reference: GQA groups, causal blocks, splits, long contexts.

Tolerances: kernel_tolerance.attention_bound from the kernel's DOT_PRECISION (the rule is in that file).
"""
from __future__ import annotations

import pytest
import torch
from kernel_tolerance import assert_within, attention_bound

from runtime.kernels.attention import DOT_PRECISION, attention_ref, decode_attention, scratch_for, verify_attention


def _check(got, q, k, v, L, what):
    """got (T, H, D) from the kernel vs attention_ref within the bound derived for these inputs."""
    want = attention_ref(q, k, v, L)
    assert_within(got, want, attention_bound(q, k, v, L, DOT_PRECISION), what)


def _dev():
    return "cuda" if torch.cuda.is_available() else "cpu"


def _case(T, H, kvh, D, L, cap=None, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    cap = cap or L
    q = torch.randn(T, H, D, generator=g).to(dtype).to(_dev())
    k = torch.randn(kvh, cap, D, generator=g).to(dtype).to(_dev())
    v = torch.randn(kvh, cap, D, generator=g).to(dtype).to(_dev())
    return q, k, v


@pytest.mark.parametrize("H,kvh,D,L,cap,split_keys", [
    (14, 2, 64, 1, 10, 256),     # the first token: one key
    (14, 2, 64, 37, 46, 64),     # odd length, one split
    (14, 2, 64, 301, 310, 64),   # odd length over 5 splits (the last one partly filled)
    (12, 2, 128, 130, 139, 64),  # the 1.5B's head layout (tiles of 32 keys)
    (4, 4, 64, 5, 520, 64),      # no GQA; capacity far past L: 9 split programs, 8 without a key
])
def test_decode_attention_matches_reference(H, kvh, D, L, cap, split_keys):
    q, k, v = _case(1, H, kvh, D, L, cap=cap, seed=L)  # capacity past L: garbage there must be ignored
    got = decode_attention(q[0], k, v, L, split_keys=split_keys)
    assert got.shape == (H, D)
    _check(got[None], q, k, v, L, f"decode L={L}")


def test_decode_attention_long_context_split():
    """A long context (6000 keys) in splits of 256 (24 of them), bf16 cache: one pass, merged by log-sum-exp."""
    q, k, v = _case(1, 14, 2, 64, 6000, dtype=torch.bfloat16, seed=7)
    got = decode_attention(q, k, v, 6000)
    assert got.dtype == torch.bfloat16
    _check(got, q, k, v, 6000, "decode L=6000 bf16")  # the output's bf16 rounding is the rule's eps term


@pytest.mark.parametrize("T,L,split_keys", [(2, 2, 64), (4, 67, 64), (8, 200, 64), (16, 16, 64), (16, 333, 128),
                                            (5, 90, 256)])
def test_verify_attention_is_causal_inside_the_block(T, L, split_keys):
    q, k, v = _case(T, 14, 2, 64, L, cap=L + 3, seed=T * 1000 + L)
    _check(verify_attention(q, k, v, L, split_keys=split_keys), q, k, v, L, f"verify T={T} L={L}")


def test_verify_rows_equal_sequential_decodes():
    """Row t of a verify block is bit-equal to the decode at length L-T+t+1, across a split boundary too:
    the lossless-speculation property (fixed split places, tiles a verify row masks whole add exact zeros).

    On the GPU an "ieee" tl.dot sums each element over k in order, wherever its row sits in the tile. The
    interpreter's numpy matmul does not (its BLAS orders a row's sum by the row's place in the tile), so
    there the rows are held to the derived bound instead."""
    T, L = 8, 131
    q, k, v = _case(T, 14, 2, 64, L, cap=200, seed=5)
    block = verify_attention(q, k, v, L, split_keys=64)
    for t in range(T):
        one = decode_attention(q[t], k, v, L - T + t + 1, split_keys=64)
        if torch.cuda.is_available():
            assert torch.equal(block[t], one), f"row {t}: max |diff| {float((block[t] - one).abs().max()):.3e}"
        else:
            bound = attention_bound(q[t : t + 1], k, v, L - T + t + 1, DOT_PRECISION)
            assert_within(block[t : t + 1], one[None], bound, f"row {t}")


def test_seq_len_from_device_tensor_and_static_buffers():
    """seq_len as a tensor and caller-owned out/scratch (the CUDA-graph form) give the same as an int."""
    T, H, kvh, D, cap = 8, 14, 2, 64, 256
    q, k, v = _case(T, H, kvh, D, cap, seed=11)
    seq = torch.tensor([120], dtype=torch.int32, device=_dev())
    out = torch.empty(T, H, D, device=_dev())
    scratch = scratch_for(T, H, kvh, D, cap, _dev(), split_keys=64)
    verify_attention(q, k, v, seq, split_keys=64, out=out, scratch=scratch)
    _check(out, q, k, v, 120, "seq_len tensor 120")
    seq.fill_(200)  # same buffers, a longer cache: what a graph replay does after the cache grew
    verify_attention(q, k, v, seq, split_keys=64, out=out, scratch=scratch)
    _check(out, q, k, v, 200, "seq_len tensor 200")


def test_strided_q_view_of_fused_qkv():
    T, H, kvh, D, L = 2, 14, 2, 64, 40
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(T, (H + 2 * kvh) * D, generator=g).to(_dev())
    q = qkv[:, : H * D].view(T, H, D)
    _, k, v = _case(T, H, kvh, D, L, seed=4)
    _check(verify_attention(q, k, v, L), q, k, v, L, "strided q")


def test_bound_catches_a_wrong_kernel():
    """The derived bound is tight enough to fail an attention that drops one key (a mask off by one)."""
    T, H, kvh, D, L = 1, 14, 2, 64, 37
    q, k, v = _case(T, H, kvh, D, L, seed=9)
    wrong = attention_ref(q, k, v, L - 1)  # sees keys 0..L-2 only
    with pytest.raises(AssertionError, match="past the derived bound"):
        assert_within(wrong, attention_ref(q, k, v, L), attention_bound(q, k, v, L, DOT_PRECISION))
