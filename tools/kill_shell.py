"""KillShell: stop a background shell's whole process group (Claude Code's tool)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tools._args import check_args
from tools.base import ToolContext, ToolResult


@dataclass
class KillShellTool:
    name: ClassVar[str] = "KillShell"
    # It touches only the session's own shells, so like Claude Code's it needs no permission (read-only here).
    read_only: ClassVar[bool] = True
    description: ClassVar[str] = "Stop a background shell started by Bash with run_in_background, and its child processes."
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {"shell_id": {"type": "string", "description": "The shell id, e.g. bash_1"}},
        "required": ["shell_id"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        args, error = check_args(self.input_schema, args)
        if error:
            return ToolResult(error, is_error=True)
        before = ctx.shells.get(args["shell_id"])
        if before is None:
            known = ", ".join(ctx.shells.shells) or "none"
            return ToolResult(f"No background shell {args['shell_id']!r} (shells: {known}).", is_error=True)
        was = before.status
        shell = ctx.shells.kill(args["shell_id"])
        if was != "running":
            return ToolResult(f"Shell {shell.shell_id} had already finished ({was}, exit code {shell.exit_code}); "
                              "any processes it left were stopped.", data={"shell_id": shell.shell_id, "status": was})
        return ToolResult(f"Successfully killed shell: {shell.shell_id} ({shell.command})",
                          data={"shell_id": shell.shell_id, "status": shell.status})
