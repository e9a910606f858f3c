"""The calls a failing test makes into the project's functions, with what each returned: the pipeline runs the
reproduced test once more under call_trace_plugin when the bug may be in one of several files. The model is never
shown the values (it took them as right); oracle.py asks it what the callees should return instead, and the user
sees the trace as a `trace` step."""
from __future__ import annotations

import json
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.pipeline.shell_runs import run_command

PLUGIN = "agent.pipeline.call_trace_plugin"
ON_VAR, MARK = "AGENT_CALL_TRACE", "AGENT_CALL_TRACE "  # the plugin's own copies (it imports nothing of the agent)
TRACE_TIMEOUT_S = 30
MAX_LINES = 12
PYTEST_COMMAND = re.compile(r"^python3? -m pytest\b(?P<rest>[^;&|<>`$]*)$")
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line \d+, in ', re.MULTILINE)


@dataclass(frozen=True)
class Call:
    name: str
    args: str  # as repr shows them, shortened
    depth: int  # 0: called by the test; 1: by a depth-0 call; ...
    returned: str | None  # repr of the value; None: it did not return (raised)
    file: str = ""  # the defining file, relative to the project

    def shown(self) -> str:
        return f"{self.name}({self.args})"


@dataclass
class Trace:
    test: str
    calls: list[Call] = field(default_factory=list)

    def text(self) -> str:
        """The calls as lines, callees indented under their caller; "" when there are none."""
        lines: list[str] = []
        for call in self.calls:
            line = "  " * min(call.depth, 4) + call.shown() + \
                (f" returned {call.returned}" if call.returned is not None else " did not return")
            if line not in lines:
                lines.append(line)
            if len(lines) == MAX_LINES:
                lines.append("...")
                break
        if not lines:
            return ""
        return (f"The harness traced the failing test {self.test}: the calls it made into the project's "
                "functions (callees indented) and what each returned:\n" + "\n".join(lines))


def traced_command(command: str) -> str | None:
    """The pytest check run by the agent's own interpreter with the plugin (which that interpreter can import);
    None for a command that is not a plain pytest run."""
    m = PYTEST_COMMAND.match(command.strip())
    if m is None:
        return None
    return f"{shlex.quote(sys.executable)} -m pytest{m['rest']} -p {PLUGIN}"


def trace_failing_test(command: str, root: Path, env: dict[str, str], sandbox: Any = None) -> Trace | None:
    """The first failing test's calls; None when the command is not pytest, nothing failed, or no project
    function ran."""
    traced = traced_command(command)
    if traced is None:
        return None
    _, output, _ = run_command(traced, root, {**env, ON_VAR: "1"}, sandbox, TRACE_TIMEOUT_S)
    line = next((ln for ln in output.splitlines() if ln.startswith(MARK)), None)
    try:
        return parse_trace(json.loads(line[len(MARK):])) if line else None
    except ValueError:
        return None


def parse_trace(data: Any) -> Trace | None:
    raw = data.get("calls") if isinstance(data, dict) else None
    calls = []
    for row in raw if isinstance(raw, list) else []:
        try:
            returned = row.get("returned")
            calls.append(Call(str(row["name"]), str(row["args"]), max(0, int(row["depth"])),
                              None if returned is None else str(returned), str(row.get("file", ""))))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return Trace(str(data.get("test", "")), calls) if calls else None


def traceback_files(output: str, root: Path) -> list[Path]:
    """The project's files a Python traceback passes through, the innermost first (library frames left out)."""
    root = root.resolve()
    out: list[Path] = []
    for m in reversed(list(FRAME.finditer(output))):
        try:  # the program's own output: a name too long, a NUL or a symlink loop is no frame of ours
            path = (root / m["file"]).resolve()
            if path.is_relative_to(root) and path.is_file() and path not in out and \
                    not any(part in ("site-packages", "dist-packages") or part.startswith(".") for part in
                            path.relative_to(root).parts):
                out.append(path)
        except (OSError, ValueError, RuntimeError):
            continue
    return out
