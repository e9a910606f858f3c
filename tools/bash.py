"""Bash: run a command in its own process group; cwd persists, output is bounded, timeouts kill the group."""
from __future__ import annotations

import os
import shlex
import select
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from tools._args import check_args
from tools._spill import FILE_HEAD_BYTES, FILE_TAIL_BYTES, OutputSpill
from tools.base import ToolContext, ToolResult
from tools.shells import stop_group


@dataclass
class BashTool:
    default_timeout_ms: int = 120_000
    max_timeout_ms: int = 600_000
    max_output_bytes: int = 30_000  # larger output keeps its head and tail; the rest goes to a capped file
    kill_grace_s: float = 2.0  # between SIGTERM and SIGKILL
    poll_s: float = 0.05  # how often cancel and the deadline are checked
    spill_head_bytes: int = FILE_HEAD_BYTES  # a long output's file keeps this much of its start
    spill_tail_bytes: int = FILE_TAIL_BYTES  # and this much of its end
    drain_s: float = 0.5  # output still read after bash exits while a child it left holds the pipe
    output_dir: str | None = None  # where output files go when ToolContext.output_dir is None; None = temp dir
    # The session's sandbox (agent/core/sandbox_policy.py): wrap(command, argv, cwd, keep) -> argv; None = none.
    sandbox: Any = None

    name: ClassVar[str] = "Bash"
    read_only: ClassVar[bool] = False
    description: ClassVar[str] = (
        "Run a shell command with bash; returns its output (stdout and stderr), exit code and duration. "
        "The working directory persists between calls. Nothing can be typed into the command: use "
        "non-interactive flags; timeout is in milliseconds (default 120000). For servers and watchers set "
        "run_in_background: it returns a shell id for BashOutput and KillShell.")
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line to run"},
            "timeout": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "Timeout in milliseconds"},
            "description": {"type": "string", "description": "What the command does, in a few words"},
            "run_in_background": {"type": "boolean", "description": "Return at once with a shell id"},
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
            return self._start_background(command, cwd, env, ctx)
        timeout_ms = min(args.get("timeout", self.default_timeout_ms), self.max_timeout_ms)
        output_dir = ctx.output_dir or self.output_dir
        if output_dir:
            os.makedirs(output_dir, exist_ok=True)  # a tmp cleaner may have removed the session's directory
        spill = OutputSpill(output_dir, self.max_output_bytes, self.spill_head_bytes, self.spill_tail_bytes)
        cwd_fd, cwd_path = tempfile.mkstemp(prefix="agent-cwd-", dir=output_dir)
        os.close(cwd_fd)
        # The EXIT trap records where the command left the shell and keeps its exit status; it sits on the
        # command's own line so bash's "line N" in error messages stays right.
        script = f"trap {shlex.quote('pwd -P > ' + shlex.quote(cwd_path))} EXIT; {command}"
        start = time.monotonic()
        read_fd, write_fd = os.pipe()
        try:
            proc = subprocess.Popen(self._argv(command, script, cwd, (cwd_path,)), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=write_fd, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            os.close(read_fd)
            os.unlink(cwd_path)
            return ToolResult(f"Cannot start bash: {e.strerror or e}.", is_error=True)
        finally:
            os.close(write_fd)
        ctx.shells.track(proc.pid)
        try:
            stopped = self._wait(proc, read_fd, spill, ctx, start + timeout_ms / 1000)
        finally:
            os.close(read_fd)
        duration = time.monotonic() - start
        left_running = ctx.shells.settle(proc.pid)
        code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode  # killed by signal N -> 128+N
        self._update_cwd(ctx, cwd_path)
        output, saved = spill.finish()
        data = {"exit_code": code, "duration_ms": round(duration * 1000), "cwd": str(ctx.shell_cwd or ctx.cwd)}
        if saved:
            data["output_file"] = saved
        if stopped == "timeout":
            tail = f"[Timed out after {timeout_ms / 1000:g}s; the command and its child processes were killed.]"
            return ToolResult(note + output + tail, is_error=True, data={**data, "timed_out": True})
        if stopped == "cancel":
            tail = "[Cancelled by the user; the command and its child processes were killed.]"
            return ToolResult(note + output + tail, is_error=True, data={**data, "cancelled": True})
        if left_running:  # `server &`: still recorded, and stopped when the session ends
            output += ("[Processes it started are still running; they will be stopped when the session ends. "
                       "For a server or watcher, use run_in_background and read its output with BashOutput.]\n")
        return ToolResult(f"{note}{output}[exit code {code}, {duration:.2f}s]", data=data)

    def _argv(self, command: str, script: str, cwd: Path, keep: tuple[str, ...]) -> list[str]:
        argv = ["bash", "-c", script]
        return self.sandbox.wrap(command, argv, cwd, keep) if self.sandbox is not None else argv

    def _wait(self, proc: subprocess.Popen, fd: int, spill: OutputSpill, ctx: ToolContext,
              deadline: float) -> str | None:
        """Copy the output into `spill` until the command ends; on timeout or cancel kill its whole process
        group. Returns why it stopped early. Once bash has exited, reading stops at end of output or after
        drain_s: a child it left running may hold the pipe open for ever."""
        eof, ended_at, reason = False, None, None
        while True:
            if not eof:
                if select.select([fd], [], [], self.poll_s)[0]:
                    chunk = os.read(fd, 65536)
                    eof = not chunk
                    spill.write(chunk)
            elif proc.poll() is None:
                time.sleep(self.poll_s)  # bash closed its output but still runs
            if proc.poll() is not None:
                ended_at = ended_at or time.monotonic()
                if eof or time.monotonic() - ended_at > self.drain_s:
                    return reason
                continue
            reason = "cancel" if ctx.cancel.is_set() else "timeout" if time.monotonic() >= deadline else None
            if reason:
                stop_group(proc.pid, proc, self.kill_grace_s)

    def _update_cwd(self, ctx: ToolContext, cwd_path: str) -> None:
        try:
            recorded = Path(cwd_path).read_text().strip()
        finally:
            os.unlink(cwd_path)
        if recorded and Path(recorded).is_dir():  # empty when the shell was killed or exec'd
            ctx.shell_cwd = Path(recorded)

    def _start_background(self, command: str, cwd: Path, env: dict, ctx: ToolContext) -> ToolResult:
        try:
            shell = ctx.shells.start(command, self._argv(command, command, cwd, ()), cwd, env)
        except (OSError, RuntimeError) as e:
            return ToolResult(f"Cannot start it in the background: {getattr(e, 'strerror', None) or e}.",
                              is_error=True)
        sid = shell.shell_id
        return ToolResult(f"Command running in background with ID: {sid}. Read its new output with "
                          f'BashOutput(bash_id="{sid}"); stop it with KillShell(shell_id="{sid}").',
                          data={"shell_id": sid, "pid": shell.pid, "background": True})
