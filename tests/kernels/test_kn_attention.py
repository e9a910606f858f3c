"""Decode / verify attention kernels vs the fp32 torch reference: GQA groups, causal blocks, splits, long contexts.

Tolerances: kernel_tolerance.attention_bound from the kernel's DOT_PRECISION (the rule is in that file).
"""
from __future__ import annotations

import pytest
import torch
from kernel_tolerance import assert_within, attention_bound

from kernels.attention import DOT_PRECISION, attention_ref, decode_attention, scratch_for, verify_attention


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


@pytest.mark.parametrize("H,kvh,D,L,splits", [
    (14, 2, 64, 1, 1),      # the first token: one key
    (14, 2, 64, 37, 1),     # odd length, one split
    (14, 2, 64, 301, 4),    # odd length over several splits (the last split partly empty)
    (12, 2, 128, 130, 3),   # the 1.5B's head layout
    (4, 4, 64, 5, 8),       # no GQA; more splits than key tiles (empty splits)
])
def test_decode_attention_matches_reference(H, kvh, D, L, splits):
    q, k, v = _case(1, H, kvh, D, L, cap=L + 9, seed=L)  # capacity past L: garbage there must be ignored
    got = decode_attention(q[0], k, v, L, num_splits=splits)
    assert got.shape == (H, D)
    _check(got[None], q, k, v, L, f"decode L={L}")


def test_decode_attention_long_context_split():
    """A long context (6000 keys) split 8 ways, bf16 cache: one pass over the KV, merged by log-sum-exp."""
    q, k, v = _case(1, 14, 2, 64, 6000, dtype=torch.bfloat16, seed=7)
    got = decode_attention(q, k, v, 6000, num_splits=8)
    assert got.dtype == torch.bfloat16
    _check(got, q, k, v, 6000, "decode L=6000 bf16")  # the output's bf16 rounding is the rule's eps term


@pytest.mark.parametrize("T,L,splits", [(2, 2, 1), (4, 67, 2), (8, 200, 3), (16, 16, 2), (16, 333, 5), (5, 90, 1)])
def test_verify_attention_is_causal_inside_the_block(T, L, splits):
    q, k, v = _case(T, 14, 2, 64, L, cap=L + 3, seed=T * 1000 + L)
    _check(verify_attention(q, k, v, L, num_splits=splits), q, k, v, L, f"verify T={T} L={L}")


def test_verify_rows_equal_sequential_decodes():
    """Row t of a verify block is what a decode at length L-T+t+1 gives: the lossless-speculation property."""
    T, L = 4, 50
    q, k, v = _case(T, 14, 2, 64, L, seed=5)
    block = verify_attention(q, k, v, L, num_splits=2)
    for t in range(T):
        one = decode_attention(q[t], k, v, L - T + t + 1, num_splits=2)
        # both within the bound of the exact value, so within the bound of each other (the splits cut
        # the sequence at other places for another length: the sums are not in the same order)
        assert_within(block[t : t + 1], one[None], attention_bound(q[t : t + 1], k, v, L - T + t + 1, DOT_PRECISION),
                      f"row {t}")


def test_seq_len_from_device_tensor_and_static_buffers():
    """seq_len as a tensor and caller-owned out/scratch (the CUDA-graph form) give the same as an int."""
    T, H, kvh, D, cap = 8, 14, 2, 64, 256
    q, k, v = _case(T, H, kvh, D, cap, seed=11)
    seq = torch.tensor([120], dtype=torch.int32, device=_dev())
    out = torch.empty(T, H, D, device=_dev())
    scratch = scratch_for(T, H, kvh, D, 4, _dev())
    verify_attention(q, k, v, seq, num_splits=4, out=out, scratch=scratch)
    _check(out, q, k, v, 120, "seq_len tensor 120")
    seq.fill_(200)  # same buffers, a longer cache: what a graph replay does after the cache grew
    verify_attention(q, k, v, seq, num_splits=4, out=out, scratch=scratch)
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
