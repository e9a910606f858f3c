"""Bubblewrap: run a command with the system read-only, chosen paths writable or hidden, and no network.

`bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind <project> <project> ...`: the project
and a private /tmp are writable, hidden directories become empty tmpfs mounts, hidden files /dev/null,
read-only paths inside the project are bound read-only again, and the network namespace is unshared
unless allowed. The process group stays ours, so a timeout still kills everything inside.
"""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class SandboxLayout:
    writable: tuple[Path, ...] = ()  # the project and additional dirs
    hidden: tuple[Path, ...] = ()  # secrets and Read-denied paths: empty inside
    read_only: tuple[Path, ...] = ()  # inside a writable dir but not to be changed (settings, .git/hooks)
    # Directories that must not come into being inside (.agent/ with a settings file): an empty read-only
    # mount; bubblewrap creates the empty mount point in the real directory.
    absent_read_only: tuple[Path, ...] = ()
    network: bool = False


@dataclass
class Bubblewrap:
    executable: str = "bwrap"
    _probe: tuple[bool, str] | None = field(default=None, repr=False)

    def available(self) -> tuple[bool, str]:
        """(runs here, why not); probed once: a tiny sandbox must start and exit 0."""
        if self._probe is None:
            path = shutil.which(self.executable)
            if path is None:
                self._probe = (False, "bubblewrap (bwrap) is not installed")
            else:
                try:
                    done = subprocess.run([path, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-net",
                                           "--unshare-pid", "--proc", "/proc", "true"],
                                          capture_output=True, text=True, timeout=10)
                    why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
                    self._probe = (done.returncode == 0, "" if done.returncode == 0 else f"bwrap cannot run here: {why}")
                except (OSError, subprocess.TimeoutExpired) as e:
                    self._probe = (False, f"bwrap cannot run here: {e}")
        return self._probe

    def wrap(self, argv: list[str], cwd: Path, layout: SandboxLayout, keep: tuple[str, ...] = ()) -> list[str]:
        """argv run inside the sandbox; `keep`: files outside the writable dirs the command must write (cwd record)."""
        args = [shutil.which(self.executable) or self.executable, "--ro-bind", "/", "/", "--dev", "/dev",
                "--proc", "/proc", "--tmpfs", "/tmp", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--setenv", "TMPDIR", "/tmp"]
        if not layout.network:
            args.append("--unshare-net")
        for path in layout.writable:
            if path.exists():
                args += ["--bind", str(path), str(path)]
        for path in layout.read_only:
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
        for path in layout.absent_read_only:
            if not path.exists():
                args += ["--tmpfs", str(path), "--remount-ro", str(path)]
        for path in layout.hidden:
            if path.is_dir():
                args += ["--tmpfs", str(path), "--remount-ro", str(path)]
            elif path.exists():
                args += ["--ro-bind", "/dev/null", str(path)]
        for path in keep:
            args += ["--bind", path, path]
        args += ["--chdir", str(cwd) if cwd.is_dir() else "/", "--"]
        return args + argv

