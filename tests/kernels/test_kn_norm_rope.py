"""Fused RMSNorm (+ residual) and RoPE kernels vs their torch references (Triton's interpreter on CPU, or CUDA).

No tl.dot here: tolerances are kernel_tolerance's norm_bound / rope_bound (a length-N sum, a few roundings,
the GPU's rsqrt approximation) plus the output dtype's last place. An fp32 add rounds alike everywhere,
so an fp32 residual stream the norm updates must come out bit-equal.
"""
from __future__ import annotations

import pytest
import torch
from kernel_tolerance import assert_within, norm_bound, rope_bound

from runtime.kernels.norm import rms_norm, rms_norm_ref
from runtime.kernels.rope import rope_, rope_qkv_, rope_ref


def _dev():
    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("rows,n", [(1, 896), (5, 1536), (3, 64), (7, 100)])  # 100: not a power of two
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_matches_reference(rows, n, dtype):
    g = torch.Generator().manual_seed(rows * n)
    x = (torch.randn(rows, n, generator=g) * 3).to(dtype).to(_dev())
    w = (1 + 0.1 * torch.randn(n, generator=g)).to(_dev())
    got = rms_norm(x, w, 1e-6)
    want = rms_norm_ref(x, w, 1e-6)
    assert got.dtype == dtype and got.shape == x.shape
    assert_within(got, want, norm_bound(want, n), f"rms_norm {rows}x{n} {dtype}")


@pytest.mark.parametrize("res_dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_adds_residual_in_place(res_dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 200, generator=g).to(_dev())
    r0 = torch.randn(4, 200, generator=g).to(res_dtype).to(_dev())
    w = torch.rand(200, generator=g).to(_dev()) + 0.5
    r_kernel, r_ref = r0.clone(), r0.clone()
    got = rms_norm(x, w, 1e-5, residual=r_kernel)
    want = rms_norm_ref(x, w, 1e-5, residual=r_ref)
    # One fp32 add: bit-equal in fp32. Stored as bf16, one last place: the interpreter truncates where
    # torch and the GPU round to nearest even.
    assert_within(r_kernel, r_ref, 0.0, "residual")
    assert_within(r_kernel, (r0.float() + x).to(res_dtype), 0.0, "residual")
    assert_within(got, want, norm_bound(want, 200), "rms_norm + residual")
    assert not torch.equal(r_kernel, r0)


def test_rms_norm_fp32_residual_stream_to_bf16_output():
    """The CUDA model's form: bf16 block output added into an fp32 residual, normalized to bf16."""
    g = torch.Generator().manual_seed(5)
    delta = torch.randn(3, 896, generator=g).to(torch.bfloat16).to(_dev())
    res = torch.randn(3, 896, generator=g).to(_dev())
    w = torch.rand(896, generator=g).to(_dev())
    r1, r2 = res.clone(), res.clone()
    got = rms_norm(delta, w, 1e-6, residual=r1, out_dtype=torch.bfloat16)
    want = rms_norm_ref(delta, w, 1e-6, residual=r2, out_dtype=torch.bfloat16)
    assert got.dtype == torch.bfloat16 and r1.dtype == torch.float32
    assert torch.equal(r1, r2)
    assert_within(got, want, norm_bound(want, 896), "fp32 residual -> bf16")


def test_rms_norm_per_head_rows():
    """(T, heads, head_dim): qwen3's q/k norm normalizes each head's vector on its own."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 5, 64, generator=g).to(_dev())
    w = torch.rand(64, generator=g).to(_dev())
    want = rms_norm_ref(x, w, 1e-6)
    assert_within(rms_norm(x, w, 1e-6), want, norm_bound(want, 64), "per-head rows")


def _tables(context, dim, theta=1e6):
    half = dim // 2
    inv = 1.0 / (theta ** (torch.arange(half, dtype=torch.float64) / half))
    ang = torch.outer(torch.arange(context, dtype=torch.float64), inv)
    return ang.cos().float().to(_dev()), ang.sin().float().to(_dev())


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("T,H,D", [(1, 14, 64), (7, 2, 64), (3, 12, 128), (5, 3, 48)])  # 48: half not a power of two
def test_rope_matches_reference(T, H, D, interleaved):
    g = torch.Generator().manual_seed(T * H + D)
    cos, sin = _tables(4096, D)
    x = torch.randn(T, H, D, generator=g).to(_dev())
    pos = torch.randint(0, 4096, (T,), generator=g).to(_dev())
    want = rope_ref(x, pos, cos, sin, interleaved)
    got = rope_(x.clone(), pos, cos, sin, interleaved)
    assert_within(got, want, rope_bound(x), f"rope T={T} H={H} D={D}")
    assert not torch.allclose(want, x)  # the rotation did something


def test_rope_on_strided_views_of_fused_qkv_leaves_v_alone():
    """q and k are column ranges of one (T, (Hq + 2 Hkv) D) buffer; rotating them in place must not touch v."""
    T, Hq, Hkv, D = 4, 14, 2, 64
    g = torch.Generator().manual_seed(3)
    cos, sin = _tables(512, D)
    qkv = torch.randn(T, (Hq + 2 * Hkv) * D, generator=g).to(_dev())
    orig = qkv.clone()
    pos = torch.arange(100, 100 + T, device=_dev())
    q = qkv[:, : Hq * D].view(T, Hq, D)
    k = qkv[:, Hq * D : (Hq + Hkv) * D].view(T, Hkv, D)
    rope_(q, pos, cos, sin)
    rope_(k, pos, cos, sin)
    q0, k0 = orig[:, : Hq * D].view(T, Hq, D), orig[:, Hq * D : (Hq + Hkv) * D].view(T, Hkv, D)
    assert_within(q, rope_ref(q0, pos, cos, sin), rope_bound(q0), "rope q view")
    assert_within(k, rope_ref(k0, pos, cos, sin), rope_bound(k0), "rope k view")
    assert torch.equal(qkv[:, (Hq + Hkv) * D :], orig[:, (Hq + Hkv) * D :])


def test_rope_bf16():
    cos, sin = _tables(64, 64)
    x = torch.randn(2, 4, 64).to(torch.bfloat16).to(_dev())
    pos = torch.tensor([3, 60], device=_dev())
    got = rope_(x.clone(), pos, cos, sin)
    assert got.dtype == torch.bfloat16
    assert_within(got, rope_ref(x, pos, cos, sin), rope_bound(x), "rope bf16")


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("T,H,Hkv,D", [(1, 14, 2, 64), (5, 12, 2, 128), (3, 4, 4, 32)])
def test_rope_qkv_rotates_q_and_writes_k_v_into_the_cache(T, H, Hkv, D, interleaved):
    """One launch: q rotated in place, k rotated into the cache, v copied, at the rows' positions; nothing else
    in the cache changes."""
    g = torch.Generator().manual_seed(T * H + D)
    cos, sin = _tables(512, D)
    qkv = torch.randn(T, (H + 2 * Hkv) * D, generator=g).to(_dev())
    orig = qkv.clone()
    kc = torch.randn(Hkv, 64, D, generator=g).to(_dev())
    vc = torch.randn(Hkv, 64, D, generator=g).to(_dev())
    kc0, vc0 = kc.clone(), vc.clone()
    pos = torch.tensor([10 + 3 * t for t in range(T)], device=_dev())
    q = rope_qkv_(qkv, pos, cos, sin, kc, vc, H, Hkv, interleaved)
    q0 = orig[:, : H * D].view(T, H, D)
    k0 = orig[:, H * D : (H + Hkv) * D].view(T, Hkv, D)
    v0 = orig[:, (H + Hkv) * D :].view(T, Hkv, D)
    assert q.shape == (T, H, D) and q.data_ptr() == qkv.data_ptr()
    assert_within(q, rope_ref(q0, pos, cos, sin, interleaved), rope_bound(q0), "q")
    assert_within(kc[:, pos].transpose(0, 1), rope_ref(k0, pos, cos, sin, interleaved), rope_bound(k0), "k in cache")
    assert torch.equal(vc[:, pos].transpose(0, 1), v0)
    others = torch.ones(64, dtype=torch.bool, device=_dev())
    others[pos] = False
    assert torch.equal(kc[:, others], kc0[:, others]) and torch.equal(vc[:, others], vc0[:, others])
    assert torch.equal(qkv[:, H * D :], orig[:, H * D :])  # k and v columns of qkv untouched
