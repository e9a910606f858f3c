"""Built-in tools: one class per file, each implementing tools.base.Tool."""
from __future__ import annotations

from tools.base import Tool
from tools.bash import BashTool
from tools.bash_output import BashOutputTool
from tools.edit import EditTool
from tools.glob import GlobTool
from tools.kill_shell import KillShellTool
from tools.grep import GrepTool
from tools.ls import LSTool
from tools.multiedit import MultiEditTool
from tools.read import ReadTool
from tools.todo import TodoWriteTool
from tools.webfetch import WebFetchTool
from tools.write import WriteTool

# Tools that never change files or run commands: allowed in plan mode and safe to run concurrently.
# BashOutput and KillShell touch only the session's own background shells.
READ_ONLY_TOOL_NAMES = frozenset({"Read", "Grep", "Glob", "LS", "TodoWrite", "WebFetch", "BashOutput", "KillShell"})


def builtin_tools() -> list[Tool]:
    """Fresh instances of every built-in tool, in a fixed order (the tool list is part of the cached prefix)."""
    return [ReadTool(), WriteTool(), EditTool(), MultiEditTool(), BashTool(), BashOutputTool(), KillShellTool(),
            GrepTool(), GlobTool(), LSTool(), TodoWriteTool(), WebFetchTool()]
