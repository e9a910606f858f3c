"""Check commands run as the Bash tool would run them: the session's env, its sandbox if any, a process group of
their own that a timeout or a cancel kills."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from tools.shells import signal_group

CANCEL_POLL_S = 0.2  # how soon a running check notices Ctrl-C or SIGTERM
CHECK_TIMEOUT_S = 60  # the first candidate's check; later ones get a multiple of the slowest that ended


def as_bash_runs(agent: Any) -> tuple[dict[str, str], Any]:
    """(env, sandbox or None) the session's Bash tool runs its commands with."""
    return {**os.environ, **agent.ctx.env}, getattr(agent.tools.get("Bash"), "sandbox", None)


def run_command(command: str, root: Path, env: dict[str, str], sandbox: Any = None,
                limit_s: float = CHECK_TIMEOUT_S,
                cancel: threading.Event | None = None) -> tuple[int | None, str, float]:
    """(exit code, None on a timeout, a cancel or a failed start; output; seconds). The command runs as the Bash
    tool would run it (in the session's sandbox, if any) in its own process group, all of which a timeout or a
    cancel kills: a candidate's endless loop once outlived its shell and held a core for the rest of the session."""
    argv = ["bash", "-c", command]
    argv = sandbox.wrap(command, argv, root) if sandbox is not None else argv
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as e:
        return None, str(e), 0.0
    deadline = start + limit_s
    try:
        while True:  # communicate() may be called again after its timeout without losing output
            try:
                raw, _ = proc.communicate(timeout=max(0.0, min(CANCEL_POLL_S, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    return None, "", limit_s
                if cancel is not None and cancel.is_set():
                    return None, "", time.monotonic() - start
    finally:
        signal_group(proc.pid, signal.SIGKILL)  # what the command left running in the background goes too
        proc.wait()
    return proc.returncode, raw.decode("utf-8", "replace"), time.monotonic() - start
