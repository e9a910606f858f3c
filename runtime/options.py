"""RuntimeOptions: how the runtime runs on this machine (device, threads, cache dir, CPU kernel, prefix KV budget).

Only CLIs read the environment, through `RuntimeOptions.from_env(os.environ)`; everything below them takes the
options (or single values from them) as arguments.

    AGENT_DEVICE              auto | cpu | cuda (auto: CUDA when torch sees a GPU)
    AGENT_THREADS             torch threads (unset or 0: min(cpu count, 8))
    AGENT_CACHE_DIR           models, converted weights, CPU kernel builds, prefix KV (default: the user cache dir)
    AGENT_CPU_KERNEL          0 / off / false / no: torch's matmuls instead of runtime/cpu_kernels
    AGENT_CPU_KERNEL_MAX_M    most rows per kernel call, 1..256 (default 256)
    AGENT_PREFIX_CACHE_BYTES  prefix KV store budget, e.g. 1073741824, 512M, 2G (default 1 GiB; 0 = off)
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from runtime.models import default_cache_dir

DEVICES = ("auto", "cpu", "cuda")
KERNEL_MAX_M = 256  # ck.c's MAX_M: the most rows one kernel call takes
DEFAULT_PREFIX_CACHE_BYTES = 1 << 30
_OFF = ("0", "off", "false", "no")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(text: str) -> int | None:
    """'1073741824', '512M', '2G', '1.5GiB' -> bytes; None when it is not a size."""
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    unit = t[-1:] if t[-1:] in _UNITS and t[-1:] else ""
    try:
        value = float(t[: len(t) - len(unit)] if unit else t)
    except ValueError:
        return None
    return int(value * _UNITS[unit]) if value >= 0 else None


@dataclass(frozen=True)
class RuntimeOptions:
    device: str = "auto"  # "auto" | "cpu" | "cuda"
    threads: int | None = None  # torch threads; None: min(cpu count, 8)
    cache_dir: Path = field(default_factory=default_cache_dir)
    cpu_kernel: bool = True  # False: torch's matmuls only
    cpu_kernel_max_m: int = KERNEL_MAX_M  # larger inputs run through the kernel in pieces of this many rows
    prefix_cache_bytes: int = DEFAULT_PREFIX_CACHE_BYTES  # 0: no prefix KV store (no warm starts)

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ValueError(f"threads must be an integer >= 1 (or unset), got {self.threads!r}")
        if not isinstance(self.cpu_kernel_max_m, int) or not 1 <= self.cpu_kernel_max_m <= KERNEL_MAX_M:
            raise ValueError(f"cpu_kernel_max_m must be an integer in 1..{KERNEL_MAX_M}, got {self.cpu_kernel_max_m!r}")
        if not isinstance(self.prefix_cache_bytes, int) or self.prefix_cache_bytes < 0:
            raise ValueError(f"prefix_cache_bytes must be an integer >= 0, got {self.prefix_cache_bytes!r}")
        object.__setattr__(self, "cache_dir", Path(self.cache_dir).expanduser())

    @property
    def torch_threads(self) -> int:
        return self.threads or max(1, min(os.cpu_count() or 1, 8))

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "RuntimeOptions":
        """Options from AGENT_* variables (unset or empty: the default); a bad value raises a one-line ValueError."""
        def get(name: str) -> str | None:
            value = environ.get(name, "").strip()
            return value or None

        kw: dict = {}
        if (device := get("AGENT_DEVICE")) is not None:
            kw["device"] = device.lower()
        if (threads := get("AGENT_THREADS")) is not None:
            kw["threads"] = _int("AGENT_THREADS", threads) or None  # 0: the default
        if (cache := get("AGENT_CACHE_DIR")) is not None:
            kw["cache_dir"] = Path(cache)
        if (kernel := get("AGENT_CPU_KERNEL")) is not None:
            kw["cpu_kernel"] = kernel.lower() not in _OFF
        if (max_m := get("AGENT_CPU_KERNEL_MAX_M")) is not None:
            kw["cpu_kernel_max_m"] = _int("AGENT_CPU_KERNEL_MAX_M", max_m)
        if (budget := get("AGENT_PREFIX_CACHE_BYTES")) is not None:
            kw["prefix_cache_bytes"] = parse_bytes(budget)
            if kw["prefix_cache_bytes"] is None:
                raise ValueError(f"AGENT_PREFIX_CACHE_BYTES must be a size (e.g. 1073741824, 512M, 2G), got {budget!r}")
        try:
            return cls(**kw)
        except ValueError as e:
            raise ValueError(f"bad AGENT_* setting: {e}") from None


def _int(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {text!r}") from None
