"""McpTool: one MCP server tool behind the Tool seam, named mcp__<server>__<tool> as Claude Code names it.

Its input schema goes to the engine like a built-in's (constrained decoding included); a schema that is
not an object schema keeps the tool out with a one-line warning. Results become text; an error, a crash,
a timeout or a result past the size cap is a one-line error result and the session goes on.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import mcp_types

from agent.mcp.client import McpCallError, McpManager
from tools.base import ToolContext, ToolResult

MAX_RESULT_CHARS = 25_000  # a result past this is refused (the window of a small local model is 8-32k tokens)


def tool_name(server: str, tool: str) -> str:
    """mcp__server__tool, with characters other than letters, digits, _ and - replaced by _."""
    return "mcp__" + re.sub(r"[^A-Za-z0-9_-]", "_", server) + "__" + re.sub(r"[^A-Za-z0-9_-]", "_", tool)


@dataclass
class McpTool:
    name: str
    description: str
    input_schema: dict
    server: str
    remote_name: str  # the tool's own name on its server
    manager: McpManager
    timeout_s: float = 120.0
    max_result_chars: int = MAX_RESULT_CHARS
    read_only: bool = False  # whatever the server hints, a call needs the user's permission (Claude Code's rule)

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        try:
            result = self.manager.call(self.server, self.remote_name, args, timeout_s=self.timeout_s,
                                       cancel=ctx.cancel)
        except McpCallError as e:
            return ToolResult(str(e), is_error=True, data={"server": self.server})
        text = result_text(result)
        if len(text) > self.max_result_chars:
            return ToolResult(f"MCP tool {self.remote_name} on {self.server!r} returned {len(text):,} characters, "
                              f"over the {self.max_result_chars:,} limit; ask it for less.", is_error=True,
                              data={"server": self.server, "chars": len(text)})
        return ToolResult(text, is_error=bool(result.is_error), data={"server": self.server})


def make_tools(manager: McpManager, server: str, *, timeout_s: float = 120.0) -> tuple[list[McpTool], list[str]]:
    """The connected server's tools as McpTools, and one-line warnings for the ones left out."""
    tools, warnings = [], []
    for t in manager.servers[server].tools:
        schema = t.input_schema
        problem = schema_problem(schema)
        if problem:
            warnings.append(f"MCP server {server!r}: tool {t.name} left out: {problem}")
            continue
        description = (t.description or t.title or t.name).strip()
        tools.append(McpTool(tool_name(server, t.name), f"{description} (MCP server {server})", dict(schema),
                             server, t.name, manager, timeout_s))
    return tools, warnings


def schema_problem(schema: Any) -> str:
    """Why an input schema cannot be offered ('' when it can): it must be a JSON object schema."""
    if not isinstance(schema, dict):
        return "its input schema is not a JSON object"
    if schema.get("type", "object") != "object":
        return f"its input schema has type {schema.get('type')!r}, not object"
    if not isinstance(schema.get("properties", {}), dict):
        return "its input schema's properties is not an object"
    try:
        json.dumps(schema)
    except (TypeError, ValueError):
        return "its input schema is not plain JSON"
    return ""


def result_text(result: mcp_types.CallToolResult) -> str:
    """Text blocks as they are; other blocks as one-line placeholders; structured content when there is no text."""
    parts = []
    for block in result.content or []:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.EmbeddedResource):
            res = block.resource
            parts.append(res.text if isinstance(res, mcp_types.TextResourceContents)
                         else f"[binary resource {res.uri} ({res.mime_type or 'unknown type'})]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource {block.uri}]")
        else:  # images and audio: a small local model cannot look at them
            parts.append(f"[{block.type} content ({getattr(block, 'mime_type', '') or 'unknown type'}) not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts) if parts else "(no output)"
