"""Built-in tools: one class per file, each implementing tools.base.Tool."""
from __future__ import annotations

from tools.base import Tool
from tools.bash import BashTool
from tools.edit import EditTool
from tools.glob import GlobTool
from tools.grep import GrepTool
from tools.ls import LSTool
from tools.multiedit import MultiEditTool
from tools.read import ReadTool
from tools.todo import TodoWriteTool
from tools.webfetch import WebFetchTool
from tools.write import WriteTool

# Tools that never change files or run commands: allowed in plan mode and safe to run concurrently.
READ_ONLY_TOOL_NAMES = frozenset({"Read", "Grep", "Glob", "LS", "TodoWrite", "WebFetch"})


def builtin_tools() -> list[Tool]:
    """Fresh instances of every built-in tool, in a fixed order (the tool list is part of the cached prefix)."""
    return [ReadTool(), WriteTool(), EditTool(), MultiEditTool(), BashTool(), GrepTool(), GlobTool(), LSTool(),
            TodoWriteTool(), WebFetchTool()]
