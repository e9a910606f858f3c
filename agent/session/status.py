"""The status a client shows: model, mode, context use, the last engine call's figures, place and branch."""
from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class StatusInfo:
    model: str
    mode: str
    context_used: int  # tokens in the last prompt plus its reply
    context_limit: int | None
    reuse_pct: float | None  # last engine call: reused / prompt tokens
    ttft_s: float | None
    decode_tps: float | None
    spec_accept_pct: float | None  # accepted / drafted tokens, when anything was drafted
    cwd: str  # ~ for the home directory
    branch: str | None
    shells: int = 0  # background shells running


def format_figures(s: StatusInfo) -> str:
    """Model, context used/limit, and the last engine call's KV reuse, TTFT, decode speed, speculation."""
    limit = f"/{_k(s.context_limit)}" if s.context_limit else ""
    pct = f" ({100 * s.context_used / s.context_limit:.0f}%)" if s.context_limit else ""
    parts = [s.model, f"ctx {_k(s.context_used)}{limit}{pct}"]
    if s.reuse_pct is not None:
        parts.append(f"KV reuse {s.reuse_pct:.0f}%")
    if s.ttft_s:
        parts.append(f"TTFT {s.ttft_s:.2f}s")
    if s.decode_tps:
        parts.append(f"{s.decode_tps:.1f} tok/s")
    if s.spec_accept_pct is not None:
        parts.append(f"spec {s.spec_accept_pct:.0f}%")
    return " · ".join(parts)


def format_place(s: StatusInfo) -> str:
    shells = f" · {s.shells} background shell{'s' * (s.shells != 1)} (/bashes)" if s.shells else ""
    return s.cwd + (f" ({s.branch})" if s.branch else "") + shells


def format_status(s: StatusInfo) -> str:
    """The whole status on one line (plain mode's toolbar, /status)."""
    return f"{s.mode} · {format_figures(s)} · {format_place(s)}"


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def git_branch(cwd: Path) -> str | None:
    """The current branch (or short commit when detached); None outside a git repository."""
    for argv in (["git", "symbolic-ref", "--quiet", "--short", "HEAD"], ["git", "rev-parse", "--short", "HEAD"]):
        try:
            out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return None


def home_relative(path: Path) -> str:
    home = Path.home()
    try:
        return "~/" + Path(path).relative_to(home).as_posix() if Path(path) != home else "~"
    except ValueError:
        return str(path)


def time_ago(ts: float, now: float | None = None) -> str:
    s = max(0, int((now or time.time()) - ts))
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s // n}{unit} ago"
    return f"{s}s ago"
