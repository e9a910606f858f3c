"""BashOutput: what a background shell printed since the last read, its status and exit code (Claude Code's tool)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from tools._args import check_args
from tools.base import ToolContext, ToolResult

MAX_SHOWN_CHARS = 30_000  # one read; the rest is dropped with a note (the shell keeps running)


@dataclass
class BashOutputTool:
    name: ClassVar[str] = "BashOutput"
    read_only: ClassVar[bool] = True
    polls: ClassVar[bool] = True  # an identical call is not a repeat: new output arrives (agent/core/repeats.py)
    description: ClassVar[str] = (
        "Get the new output of a background shell (started by Bash with run_in_background) since the last "
        "BashOutput, with its status. filter is a regular expression: only matching lines are returned, and the "
        "others are discarded.")
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "bash_id": {"type": "string", "description": "The shell id Bash returned, e.g. bash_1"},
            "filter": {"type": "string", "description": "Regular expression; only matching lines are shown"},
        },
        "required": ["bash_id"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        args, error = check_args(self.input_schema, args)
        if error:
            return ToolResult(error, is_error=True)
        shell = ctx.shells.get(args["bash_id"])
        if shell is None:
            known = ", ".join(ctx.shells.shells) or "none are running"
            return ToolResult(f"No background shell {args['bash_id']!r} (shells: {known}).", is_error=True)
        pattern = None
        if args.get("filter"):
            try:
                pattern = re.compile(args["filter"])
            except re.error as e:
                return ToolResult(f"filter is not a valid regular expression: {e}.", is_error=True)
        status = shell.status  # before reading: output read after "completed" is then complete
        text, dropped = shell.read_new(pattern)
        cut = ""
        if len(text) > MAX_SHOWN_CHARS:
            cut = f"[... {len(text) - MAX_SHOWN_CHARS} earlier characters not shown ...]\n"
            text = text[-MAX_SHOWN_CHARS:]
        lost = f"[... {dropped} bytes of output were dropped before this read: read more often ...]\n" if dropped else ""
        parts = [f"<status>{status}</status>"]
        if shell.exit_code is not None and status != "running":
            parts.append(f"<exit_code>{shell.exit_code}</exit_code>")
        parts.append(f"<stdout>\n{lost}{cut}{text}</stdout>" if text or lost else "<stdout>(no new output)</stdout>")
        return ToolResult("\n\n".join(parts), data={"shell_id": shell.shell_id, "status": status,
                                                    "exit_code": shell.exit_code, "dropped_bytes": dropped})
