"""Bash: run a command in its own process group; cwd persists, output is bounded, timeouts kill the group."""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from tools._args import check_args
from tools.base import ToolContext, ToolResult


@dataclass
class BashTool:
    default_timeout_ms: int = 120_000
    max_timeout_ms: int = 600_000
    max_output_bytes: int = 30_000  # larger output keeps its head and tail; the rest stays in a file
    kill_grace_s: float = 2.0  # between SIGTERM and SIGKILL
    poll_s: float = 0.05  # how often cancel and the deadline are checked
    output_dir: str | None = None  # where output files go; None = the system temp dir
    # The session's sandbox (agent/core/sandbox_policy.py): wrap(command, argv, cwd, keep) -> argv; None = none.
    sandbox: Any = None

    name: ClassVar[str] = "Bash"
    read_only: ClassVar[bool] = False
    description: ClassVar[str] = (
        "Run a shell command with bash; returns its output (stdout and stderr), exit code and duration. "
        "The working directory persists between calls. Nothing can be typed into the command: use "
        "non-interactive flags. timeout is in milliseconds (default 120000); run_in_background suits servers.")
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line to run"},
            "timeout": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "Timeout in milliseconds"},
            "description": {"type": "string", "description": "What the command does, in a few words"},
            "run_in_background": {"type": "boolean", "description": "Return at once with its pid"},
        },
        "required": ["command"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        args, error = check_args(self.input_schema, args)
        if error:
            return ToolResult(error, is_error=True)
        command: str = args["command"]
        if not command.strip():
            return ToolResult("command is empty.", is_error=True)
        cwd, note = Path(ctx.shell_cwd or ctx.cwd), ""
        if not cwd.is_dir():
            cwd, ctx.shell_cwd = Path(ctx.cwd), None
            note = "[The previous working directory no longer exists; this ran in the project root.]\n"
        env = {**os.environ, **ctx.env}
        if args.get("run_in_background"):
            return self._start_background(command, cwd, env)
        timeout_ms = min(args.get("timeout", self.default_timeout_ms), self.max_timeout_ms)
        out_fd, out_path = tempfile.mkstemp(prefix="agent-bash-", suffix=".log", dir=self.output_dir)
        cwd_fd, cwd_path = tempfile.mkstemp(prefix="agent-cwd-", dir=self.output_dir)
        os.close(cwd_fd)
        # The EXIT trap records where the command left the shell and keeps its exit status; it sits on the
        # command's own line so bash's "line N" in error messages stays right.
        script = f"trap {shlex.quote('pwd -P > ' + shlex.quote(cwd_path))} EXIT; {command}"
        start = time.monotonic()
        try:
            proc = subprocess.Popen(self._argv(command, script, cwd, (cwd_path,)), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out_fd, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            os.close(out_fd)
            os.unlink(out_path)
            os.unlink(cwd_path)
            return ToolResult(f"Cannot start bash: {e.strerror or e}.", is_error=True)
        os.close(out_fd)
        stopped = self._wait(proc, ctx, start + timeout_ms / 1000)
        duration = time.monotonic() - start
        code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode  # killed by signal N -> 128+N
        self._update_cwd(ctx, cwd_path)
        output, full_kept = self._collect(out_path)
        data = {"exit_code": code, "duration_ms": round(duration * 1000), "cwd": str(ctx.shell_cwd or ctx.cwd)}
        if full_kept:
            data["output_file"] = out_path
        if stopped == "timeout":
            tail = f"[Timed out after {timeout_ms / 1000:g}s; the command and its child processes were killed.]"
            return ToolResult(note + output + tail, is_error=True, data={**data, "timed_out": True})
        if stopped == "cancel":
            tail = "[Cancelled by the user; the command and its child processes were killed.]"
            return ToolResult(note + output + tail, is_error=True, data={**data, "cancelled": True})
        return ToolResult(f"{note}{output}[exit code {code}, {duration:.2f}s]", data=data)

    def _argv(self, command: str, script: str, cwd: Path, keep: tuple[str, ...]) -> list[str]:
        argv = ["bash", "-c", script]
        return self.sandbox.wrap(command, argv, cwd, keep) if self.sandbox is not None else argv

    def _wait(self, proc: subprocess.Popen, ctx: ToolContext, deadline: float) -> str | None:
        """Wait for the command; on timeout or cancel kill its whole process group. Returns why it stopped early."""
        while True:
            try:
                proc.wait(timeout=self.poll_s)
                return None
            except subprocess.TimeoutExpired:
                pass
            reason = "cancel" if ctx.cancel.is_set() else "timeout" if time.monotonic() >= deadline else None
            if reason:
                self._kill_group(proc)
                return reason

    def _kill_group(self, proc: subprocess.Popen) -> None:
        """SIGTERM the group, give it kill_grace_s to exit, then SIGKILL whatever is left."""
        _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.kill_grace_s
        # Wait for the whole group, not just bash: children that ignore SIGTERM outlive it.
        while time.monotonic() < deadline and (proc.poll() is None or _signal_group(proc.pid, 0)):
            time.sleep(0.02)
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()

    def _update_cwd(self, ctx: ToolContext, cwd_path: str) -> None:
        try:
            recorded = Path(cwd_path).read_text().strip()
        finally:
            os.unlink(cwd_path)
        if recorded and Path(recorded).is_dir():  # empty when the shell was killed or exec'd
            ctx.shell_cwd = Path(recorded)

    def _collect(self, out_path: str) -> tuple[str, bool]:
        """The output (head and tail when too long) and whether the full file was kept for the model."""
        size = os.path.getsize(out_path)
        half = self.max_output_bytes // 2
        with open(out_path, "rb") as f:
            if size <= self.max_output_bytes:
                text = f.read().decode("utf-8", errors="replace")
                os.unlink(out_path)
                if not text:
                    return "(no output)\n", False
                return (text if text.endswith("\n") else text + "\n"), False
            head = f.read(half).decode("utf-8", errors="ignore")
            f.seek(size - half)
            tail = f.read().decode("utf-8", errors="ignore")
        head = head[: head.rfind("\n") + 1] or head  # whole lines where possible
        tail = tail[tail.find("\n") + 1:] or tail
        omitted = size - len(head.encode()) - len(tail.encode())
        note = (f"[Output was {size} bytes; the full output is saved in {out_path}: Read it with offset/limit "
                f"or Grep it.]\n")
        if not tail.endswith("\n"):
            tail += "\n"
        return f"{head}[... {omitted} bytes omitted ...]\n{tail}{note}", True

    def _start_background(self, command: str, cwd: Path, env: dict) -> ToolResult:
        out_fd, out_path = tempfile.mkstemp(prefix="agent-bg-", suffix=".log", dir=self.output_dir)
        try:
            proc = subprocess.Popen(self._argv(command, command, cwd, ()), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out_fd, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            return ToolResult(f"Cannot start bash: {e.strerror or e}.", is_error=True)
        finally:
            os.close(out_fd)
        return ToolResult(f"Started in the background: pid {proc.pid}. Its output goes to {out_path} (Read it to "
                          f"check progress). Stop it with: kill -- -{proc.pid}",
                          data={"pid": proc.pid, "output_file": out_path, "background": True})


def _signal_group(pgid: int, sig: int) -> bool:
    """Send sig to the process group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
