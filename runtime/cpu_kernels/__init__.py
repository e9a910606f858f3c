"""Our CPU matmul and attention kernel (ck.c): built with gcc at first use, cached, loaded with ctypes.

    configure(enabled=True, max_m=256, cache_dir=...)  # once, by the engine from its RuntimeOptions
    lib = kernel()            # the loaded Kernel, or None (no gcc, compile error, disabled, ...)
    lib.linear(x, segments, y, bias)

The shared object lives in <cache dir>/kernels/ck-<march>-<key>.so, key = sha256 of the source, the compiler
command, the compiler's version and the CPU's flags; it is written to a temp file and renamed into place, so
processes building it at the same time are safe, and a new build deletes the march's older ones. When it cannot be
built or loaded, kernel() returns None after one debug log line and callers keep torch's path.

Configuration: `enabled` False turns the kernel off (torch's matmuls run instead); `max_m` (at most 256, ck.c's
MAX_M) is the most rows per call: larger inputs run in pieces of that many. CC names the compiler (the compiler's
own convention).
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from runtime.options import KERNEL_MAX_M

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("ck.c")
FMT_Q8I, FMT_Q5I, FMT_Q4I = 0, 1, 2
ISA_NAMES = {0: "scalar", 1: "avx2", 2: "avx512-vnni"}
DEFAULT_MAX_M = KERNEL_MAX_M  # every M, prefill chunks too: one activation rounding everywhere


@dataclass(frozen=True)
class _Config:
    enabled: bool = True
    max_m: int = DEFAULT_MAX_M
    cache_dir: Path | None = None  # None: runtime.models.default_cache_dir()


_config = _Config()
_lock = threading.Lock()
_loaded: dict[str, "Kernel | None"] = {}  # march -> the loaded kernel (None: unavailable)


def configure(*, enabled: bool = True, max_m: int = DEFAULT_MAX_M, cache_dir: Path | None = None) -> bool:
    """Set the kernel's configuration (the engine does, from RuntimeOptions). Returns True when it changed; loaded
    kernels are then forgotten, and callers that keep plans (runtime.weights.reset_kernel_state) should drop them."""
    global _config
    if not 1 <= max_m <= KERNEL_MAX_M:
        raise ValueError(f"cpu kernel max_m must be in 1..{KERNEL_MAX_M}, got {max_m}")
    new = _Config(bool(enabled), int(max_m), Path(cache_dir) if cache_dir is not None else None)
    with _lock:
        changed, _config = new != _config, new
        if changed:
            _loaded.clear()
    return changed


def enabled() -> bool:
    return _config.enabled


def max_m() -> int:
    return _config.max_m


class Kernel:
    """The loaded library; `isa` says which code path it was compiled with."""

    def __init__(self, path: Path):
        self.path = path
        self.lib = ctypes.CDLL(str(path))
        self.lib.ck_isa.restype = ctypes.c_int
        self.isa = self.lib.ck_isa()
        f = self.lib.ck_linear
        f.restype = ctypes.c_int
        P, L, I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
        f.argtypes = [P, L, I, I, I, P, P, P, P, P, P, L, P, I]
        self._fn = f
        a = self.lib.ck_attention
        a.restype = ctypes.c_int
        a.argtypes = [P, L, P, P, L, P, I, I, I, I, L, ctypes.c_float, I]
        self._attn = a
        r = getattr(self.lib, "ck_rms_norm", None)  # absent from builds of older sources (bench/kernels.py --against)
        if r is not None:
            r.restype = ctypes.c_int
            r.argtypes = [P, L, I, I, P, ctypes.c_float, P, L]
        self._rms = r

    def plan(self, segments: list[tuple[int, torch.Tensor, torch.Tensor | None, int, int]]) -> tuple:
        """segments: (fmt, weight data, q8i row scales or None, first output column, rows) -> reusable call args.

        The tensors must stay alive while the plan is used (`plan[-1]` keeps them) and be contiguous."""
        n = len(segments)
        fmts = (ctypes.c_int * n)(*[s[0] for s in segments])
        ws = (ctypes.c_void_p * n)(*[s[1].data_ptr() for s in segments])
        scales = (ctypes.c_void_p * n)(*[s[2].data_ptr() if s[2] is not None else 0 for s in segments])
        n0 = (ctypes.c_long * n)(*[s[3] for s in segments])
        rows = (ctypes.c_long * n)(*[s[4] for s in segments])
        return (n, fmts, ws, scales, n0, rows, segments)

    def linear(self, x: torch.Tensor, plan: tuple, out_features: int, bias: torch.Tensor | None) -> torch.Tensor:
        """x (M, K) fp32, rows contiguous -> (M, out_features) fp32."""
        M, K = x.shape
        y = torch.empty(M, out_features, dtype=torch.float32)
        rc = self._fn(x.data_ptr(), x.stride(0), M, K, *plan[:-1], y.data_ptr(), out_features,
                      bias.data_ptr() if bias is not None else None, torch.get_num_threads())
        if rc:
            raise RuntimeError(f"cpu kernel rejected a ({M}, {K}) input")
        return y

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        """x (M, K) fp32 (rows may be strided, values contiguous), weight (K,) fp32 contiguous -> (M, K): each row
        alone, so M rows give what M single-row calls give, bit for bit."""
        M, K = x.shape
        assert x.dtype == weight.dtype == torch.float32 and x.stride(1) == 1 and weight.is_contiguous()
        assert weight.shape == (K,), (weight.shape, K)  # the kernel reads K weights
        if self._rms is None:
            raise RuntimeError(f"{self.path.name} has no rms_norm")
        y = torch.empty(M, K, dtype=torch.float32)
        if self._rms(x.data_ptr(), x.stride(0), M, K, weight.data_ptr(), eps, y.data_ptr(), K):
            raise RuntimeError(f"cpu kernel rejected rms_norm over ({M}, {K})")
        return y

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
        """q (T, heads, d) fp32 (rows may be strided, heads contiguous); k, v (kv_heads, >= start + T, d) fp32 views
        of a cache (rows contiguous) -> (T, heads * d): query row t sees keys 0..start + t. Each row is computed
        alone, so T rows give what T single-row calls give, bit for bit."""
        T, H, D = q.shape
        n_kv = k.shape[0]
        assert q.dtype == k.dtype == v.dtype == torch.float32 and q.stride(2) == 1 and q.stride(1) == D
        assert k.stride() == v.stride() and k.stride(2) == 1 and k.stride(1) == D and k.shape[1] >= start + T
        out = torch.empty(T, H * D, dtype=torch.float32)
        rc = self._attn(q.data_ptr(), q.stride(0), k.data_ptr(), v.data_ptr(), k.stride(0), out.data_ptr(), T, H, n_kv,
                        D, start, D ** -0.5, torch.get_num_threads())
        if rc:
            raise RuntimeError(f"cpu kernel rejected attention over ({T}, {H}, {D})")
        return out


def kernel(march: str = "native") -> Kernel | None:
    """The kernel built for `march` (tests also build "haswell", the AVX2 path), or None when unavailable."""
    if not enabled():
        return None
    with _lock:
        if march not in _loaded:
            _loaded[march] = _build_and_load(march)
        return _loaded[march]


def numerics_id() -> str:
    """Which arithmetic computes activations and K/V here (the kernel build and its row limit, or torch's):
    saved K/V is only valid for the code that computed it."""
    k = kernel()
    return f"{k.path.stem} max_m {max_m()}" if k is not None else "torch"


def reset() -> None:
    """Forget loaded kernels so the next kernel() call loads (or builds) again (tests)."""
    with _lock:
        _loaded.clear()


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    import platform

    return platform.processor() + platform.machine()


def _compiler() -> tuple[str, str] | None:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        return None
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return cc, version


def _flags(march: str) -> list[str]:
    return ["-O3", f"-march={march}", "-fopenmp", "-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno",
            "-std=gnu11"]


def _cache_dir() -> Path:
    from runtime.models import default_cache_dir

    return (_config.cache_dir or default_cache_dir()) / "kernels"


def _prune(out_dir: Path, march: str, keep: Path) -> None:
    """Delete this march's other builds (older sources, compilers or flags): one .so per march stays. A process
    still using a deleted one keeps its mapping."""
    for old in out_dir.glob(f"ck-{march}-*.so"):
        if old != keep:
            try:
                old.unlink()
            except OSError:
                pass


def _build_and_load(march: str) -> Kernel | None:
    try:
        found = _compiler()
        if found is None:
            log.debug("cpu kernel: no C compiler found; using torch's matmul")
            return None
        cc, version = found
        source = SOURCE.read_bytes()
        flags = _flags(march)
        key = hashlib.sha256(b"\0".join([source, " ".join(flags).encode(), version.encode(),
                                         _cpu_flags().encode()])).hexdigest()[:24]
        out_dir = _cache_dir()
        target = out_dir / f"ck-{march}-{key}.so"
        if not target.exists():
            out_dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".ck-", suffix=".so")
            os.close(fd)
            try:
                r = subprocess.run([cc, *flags, "-o", tmp, str(SOURCE), "-lm"], capture_output=True, text=True, timeout=300)
                if r.returncode:
                    log.debug("cpu kernel: compile failed (%s); using torch's matmul", r.stderr.strip()[-500:])
                    return None
                os.replace(tmp, target)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            _prune(out_dir, march, keep=target)
        k = Kernel(target)
        log.debug("cpu kernel: %s (%s)", target, ISA_NAMES.get(k.isa, k.isa))
        return k
    except Exception as e:  # any failure means: torch's path
        log.debug("cpu kernel unavailable (%s: %s); using torch's matmul", type(e).__name__, e)
        return None
