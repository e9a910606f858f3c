"""MultiEdit: several Edits to one file, applied in order, all or nothing."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tools._args import check_args
from tools.base import ToolContext, ToolResult
from tools.edit import edit_file


@dataclass
class MultiEditTool:
    name: ClassVar[str] = "MultiEdit"
    read_only: ClassVar[bool] = False
    description: ClassVar[str] = (
        "Make several edits to one file you have Read, in order; each edit works like Edit and sees the result "
        "of the previous ones. If any edit fails, nothing is written.")
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path of the file"},
            "edits": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "old_string": {"type": "string"},
                        "new_string": {"type": "string"},
                        "replace_all": {"type": "boolean"},
                    },
                    "required": ["old_string", "new_string"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["file_path", "edits"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        args, error = check_args(self.input_schema, args)
        if error:
            return ToolResult(error, is_error=True)
        if not args["edits"]:
            return ToolResult("edits is empty; give at least one {old_string, new_string}.", is_error=True)
        return edit_file(ctx, args["file_path"], args["edits"])
