"""/bashes: the session's background shells for the user: list them, show one's recent output, kill one.

Showing does not consume output: BashOutput still gives the model everything it has not read.
"""
from __future__ import annotations

import time

from tools.shells import ShellRegistry

USAGE = "Usage: `/bashes` lists, `/bashes ID` shows one, `/bashes kill ID` stops it."


def bashes(shells: ShellRegistry, args: str) -> str:
    """Markdown for `/bashes [ID | kill ID]`."""
    words = args.split()
    if not words:
        if not shells.shells:
            return "No background shells in this session (Bash with run_in_background starts one)."
        rows = [f"- `{s.shell_id}` {_state(s)} · `{_short(s.command)}`" for s in shells.shells.values()]
        return "\n".join(["**Background shells** (`/bashes ID` shows one, `/bashes kill ID` stops it)", *rows])
    if words[0] == "kill" and len(words) == 2:
        shell = shells.get(words[1])
        if shell is None:
            return f"No background shell `{words[1]}`."
        if shell.status != "running":
            return f"`{shell.shell_id}` had already finished ({_state(shell)})."
        shells.kill(shell.shell_id)
        return f"Killed `{shell.shell_id}` and its child processes (`{_short(shell.command)}`)."
    if len(words) == 1:
        shell = shells.get(words[0])
        if shell is None:
            return f"No background shell `{words[0]}`."
        recent = shell.recent_text().rstrip("\n") or "(no output yet)"
        return "\n".join([f"**{shell.shell_id}** {_state(shell)} · pid {shell.pid} · started {_age(shell.started)}",
                          f"`{shell.command}`", "", "```", recent, "```"])
    return USAGE


def _state(shell) -> str:
    code = shell.exit_code
    return shell.status if shell.status == "running" or code is None else f"{shell.status} (exit code {code})"


def _age(started: float) -> str:
    s = max(0, int(time.time() - started))
    return f"{s // 60}m{s % 60:02d}s ago" if s >= 60 else f"{s}s ago"


def _short(command: str, limit: int = 60) -> str:
    line = " ".join(command.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
