"""Write: create a file or overwrite one the agent has read; atomic, mode and line endings kept."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tools._args import check_args
from tools._files import atomic_write, display_path, is_crlf, read_text, remember, unified_diff
from tools.read import unread_refusal
from tools.base import ToolContext, ToolResult


@dataclass
class WriteTool:
    name: ClassVar[str] = "Write"
    read_only: ClassVar[bool] = False
    description: ClassVar[str] = (
        "Create a file with the given content, or overwrite a file you have Read. "
        "Missing parent directories are created. To change part of a file, use Edit.")
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path of the file"},
            "content": {"type": "string", "description": "The whole content of the file"},
        },
        "required": ["file_path", "content"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        args, error = check_args(self.input_schema, args)
        if error:
            return ToolResult(error, is_error=True)
        path = ctx.resolve(args["file_path"])
        shown = display_path(ctx, path)
        content: str = args["content"]
        if path.is_dir():
            return ToolResult(f"{shown} is a directory; give a file path.", is_error=True)
        created = not path.exists()
        old = ""
        try:
            if not created:
                refusal = unread_refusal(ctx, path)
                if refusal:
                    return refusal
                old = read_text(path) or ""
                if is_crlf(old) and "\r" not in content:
                    content = content.replace("\n", "\r\n")  # keep a Windows file Windows
            atomic_write(path, content.encode("utf-8"))
            remember(ctx, path)
        except OSError as e:
            return ToolResult(f"Cannot write {shown}: {e.strerror or e}.", is_error=True)
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        verb = "Created" if created else "Overwrote"
        return ToolResult(f"{verb} {shown} ({lines} line{'s' * (lines != 1)}).",
                          data={"file_path": str(path), "created": created, "diff": unified_diff(old, content, shown)})
