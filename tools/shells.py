"""Background shells: commands started with Bash(run_in_background), read with BashOutput, stopped with KillShell.

Each shell runs in its own process group; a reader thread moves its output (stdout and stderr merged)
into a buffer of what the model has not read yet, capped so a chatty server cannot fill memory (the
oldest unread bytes go first and the next read says how many). The registry also records process
groups a foreground command left running (`server &`), and `stop_all` ends every one of them when the
session ends.
"""
from __future__ import annotations

import codecs
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

MAX_RUNNING = 8  # background shells alive at once; a small model starting servers in a loop stops here
MAX_UNREAD_BYTES = 1_000_000  # per shell
KILL_GRACE_S = 2.0  # between SIGTERM and SIGKILL
RECENT_BYTES = 4096  # what /bashes shows of a shell without taking it from the model


def signal_group(pgid: int, sig: int) -> bool:
    """Send sig to the process group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:  # the id was reused by someone else's group: it is not ours any more
        return False


def stop_group(pgid: int, proc: subprocess.Popen | None = None, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM the group, give it grace_s to exit, then SIGKILL whatever is left (and reap `proc`)."""
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    # Wait for the whole group, not just its leader: children that ignore SIGTERM outlive it.
    while time.monotonic() < deadline and ((proc is not None and proc.poll() is None) or signal_group(pgid, 0)):
        time.sleep(0.02)
    signal_group(pgid, signal.SIGKILL)
    if proc is not None:
        proc.wait()


@dataclass
class BackgroundShell:
    shell_id: str
    command: str
    proc: subprocess.Popen
    started: float  # time.time()
    killed: bool = False
    dropped: int = 0  # unread bytes discarded since the last read (MAX_UNREAD_BYTES)
    total_bytes: int = 0
    _unread: bytearray = field(default_factory=bytearray)
    _decoder: codecs.IncrementalDecoder = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"))
    _partial: str = ""  # a line not finished yet, held back from a filtered read
    recent: bytearray = field(default_factory=bytearray)  # the last RECENT_BYTES, for the user (/bashes)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _reader: threading.Thread | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def status(self) -> str:
        """running | completed | failed | killed (Claude Code's words)."""
        code = self.proc.poll()
        if code is None:
            return "running"
        if self.killed:
            return "killed"
        return "completed" if code == 0 else "failed"

    @property
    def exit_code(self) -> int | None:
        code = self.proc.poll()
        return None if code is None else (code if code >= 0 else 128 - code)

    def _pump(self, fd: int, limit: int) -> None:
        """Reader thread: pipe -> unread buffer, the oldest bytes dropped past `limit`."""
        try:
            while chunk := os.read(fd, 65536):
                with self._lock:
                    self.total_bytes += len(chunk)
                    self._unread += chunk
                    self.recent = (self.recent + chunk)[-RECENT_BYTES:]
                    if len(self._unread) > limit:
                        cut = len(self._unread) - limit
                        del self._unread[:cut]
                        self.dropped += cut
        finally:
            os.close(fd)

    def recent_text(self) -> str:
        """The shell's last output, for the user; the model's unread output is left as it is."""
        with self._lock:
            data = bytes(self.recent)
        return data.decode("utf-8", errors="replace")

    def read_new(self, pattern: re.Pattern | None = None) -> tuple[str, int]:
        """(output since the last read, bytes dropped before it); with a pattern, only the matching lines."""
        if self.proc.poll() is not None and self._reader is not None:
            self._reader.join(0.5)  # the rest of a finished shell's output is on its way; a child may hold the pipe
        done = self.proc.poll() is not None and (self._reader is None or not self._reader.is_alive())
        with self._lock:
            data, dropped = bytes(self._unread), self.dropped
            self._unread.clear()
            self.dropped = 0
        text = self._partial + self._decoder.decode(data, final=done)
        self._partial = ""
        if pattern is None:
            return text, dropped
        lines = text.split("\n")
        if not done:
            self._partial = lines.pop()  # finish the line before matching it
        kept = [line for line in lines if pattern.search(line)]
        return "".join(line + "\n" for line in kept), dropped


class ShellRegistry:
    """The background shells of one session, and process groups its foreground commands left behind."""

    def __init__(self, max_running: int = MAX_RUNNING, max_unread_bytes: int = MAX_UNREAD_BYTES) -> None:
        self.max_running = max_running
        self.max_unread_bytes = max_unread_bytes
        self.shells: dict[str, BackgroundShell] = {}
        self.leftover_groups: set[int] = set()
        self._next = 1
        self._lock = threading.Lock()

    def running(self) -> list[BackgroundShell]:
        return [s for s in self.shells.values() if s.status == "running"]

    def start(self, command: str, argv: list[str], cwd: Path, env: dict[str, str]) -> BackgroundShell:
        """Start `argv` (bash running `command`) in its own process group; OSError or RuntimeError when it cannot."""
        with self._lock:
            if len(self.running()) >= self.max_running:
                raise RuntimeError(f"{self.max_running} background shells are already running; stop one with "
                                   "KillShell first")
            read_fd, write_fd = os.pipe()
            try:
                proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=write_fd,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            except BaseException:
                os.close(read_fd)
                raise
            finally:
                os.close(write_fd)
            shell = BackgroundShell(f"bash_{self._next}", command, proc, time.time())
            self._next += 1
            shell._reader = threading.Thread(target=shell._pump, args=(read_fd, self.max_unread_bytes),
                                             name=f"shell-{shell.shell_id}", daemon=True)
            shell._reader.start()
            self.shells[shell.shell_id] = shell
            return shell

    def get(self, shell_id: str) -> BackgroundShell | None:
        return self.shells.get(shell_id)

    def kill(self, shell_id: str, grace_s: float = KILL_GRACE_S) -> BackgroundShell | None:
        """Stop the shell's whole process group; None when there is no such shell."""
        shell = self.shells.get(shell_id)
        if shell is None:
            return None
        if shell.proc.poll() is None:
            shell.killed = True
        stop_group(shell.pid, shell.proc, grace_s)  # also when the leader exited: its children may not have
        if shell._reader is not None:
            shell._reader.join(1.0)
        return shell

    def track(self, pgid: int) -> None:
        """A foreground command's group while it runs: stopped by stop_all even if the command never returns
        (a second Ctrl-C or SIGTERM interrupts the Bash tool itself)."""
        self.leftover_groups.add(pgid)

    def settle(self, pgid: int) -> bool:
        """The foreground command returned: keep its group only if members are left (`server &`). True if kept."""
        if signal_group(pgid, 0):
            return True
        self.leftover_groups.discard(pgid)
        return False

    def stop_all(self, grace_s: float = KILL_GRACE_S) -> int:
        """End every background shell and leftover group (session end); how many were still running.

        All groups get SIGTERM at once and share one grace period, so ten stubborn servers cost two seconds."""
        groups = {s.pid: s for s in self.shells.values() if s.proc.poll() is None or signal_group(s.pid, 0)}
        groups.update({g: None for g in self.leftover_groups if g not in groups})
        for pgid, shell in groups.items():
            if shell is not None and shell.proc.poll() is None:
                shell.killed = True
            signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        alive = dict(groups)
        while alive and time.monotonic() < deadline:
            alive = {g: s for g, s in alive.items() if (s is not None and s.proc.poll() is None) or signal_group(g, 0)}
            time.sleep(0.02)
        for pgid in alive:
            signal_group(pgid, signal.SIGKILL)
        for shell in self.shells.values():
            shell.proc.wait()
            if shell._reader is not None:
                shell._reader.join(1.0)
        self.leftover_groups.clear()
        return len(groups)
