"""The dense small-M matmul (runtime.kernels.dense) vs its torch reference, and its batch invariance.

Tolerances: kernel_tolerance.matmul_bound from runtime.kernels.dot_precision of the operands and K.
"""
from __future__ import annotations

import pytest
import torch
from kernel_tolerance import assert_within, matmul_bound

from runtime.kernels import dot_precision
from runtime.kernels.dense import dense_matmul, dense_matmul_ref


def _dev():
    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("M,N,K,split_k", [(1, 200, 320, None), (8, 96, 136, 1), (3, 64, 256, 3), (16, 50, 70, None)])
@pytest.mark.parametrize("bias", [False, True])
def test_dense_matmul_matches_reference(M, N, K, split_k, bias):
    g = torch.Generator().manual_seed(M * N + K)
    w = (torch.randn(N, K, generator=g) * 0.05).to(_dev())
    x = torch.randn(M, K, generator=g).to(_dev())
    b = torch.randn(N, generator=g).to(_dev()) if bias else None
    got = dense_matmul(x, w, b, split_k=split_k)
    assert got.shape == (M, N) and got.dtype == x.dtype
    assert_within(got, dense_matmul_ref(x, w, b), matmul_bound(x, w.abs(), dot_precision(x.dtype, w.dtype), b),
                  f"dense {M}x{N}x{K}")


def test_dense_matmul_bf16_model_operands():
    """bf16 activations and weights (the model's): "tf32" holds them exactly, so the ieee rule applies."""
    g = torch.Generator().manual_seed(3)
    w = (torch.randn(192, 256, generator=g) * 0.05).to(torch.bfloat16).to(_dev())
    x = torch.randn(4, 256, generator=g).to(torch.bfloat16).to(_dev())
    got = dense_matmul(x, w)
    assert got.dtype == torch.bfloat16 and dot_precision(x.dtype, w.dtype) == "tf32"
    assert_within(got, dense_matmul_ref(x, w), matmul_bound(x, w.abs(), "ieee"), "dense bf16")


def test_rows_do_not_depend_on_the_other_rows():
    """Row m of an M-row call is bit-equal to a 1-row call: one tile shape and one split for every M <= 16
    (a verify block's rows are the decode steps they stand for). The interpreter's numpy matmul orders a row's
    sum by its place in the tile, so there the row is checked alone in a padded block at row 0 instead."""
    g = torch.Generator().manual_seed(4)
    w = (torch.randn(96, 448, generator=g) * 0.05).to(torch.bfloat16).to(_dev())
    x = torch.randn(8, 448, generator=g).to(torch.bfloat16).to(_dev())
    block = dense_matmul(x, w, split_k=3)
    for m in range(8):
        one = dense_matmul(x[m : m + 1], w, split_k=3)
        if torch.cuda.is_available():
            assert torch.equal(block[m : m + 1], one), m
        else:
            assert torch.equal(dense_matmul(torch.cat([x[m : m + 1], x[:m], x[m + 1 :]]), w, split_k=3)[:1], one), m


def test_more_than_sixteen_rows_is_refused():
    with pytest.raises(AssertionError, match="M <= 16"):
        dense_matmul(torch.zeros(17, 64, device=_dev()), torch.zeros(8, 64, device=_dev()))
