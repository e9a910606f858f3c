"""MCP client: servers from .mcp.json and settings, run on their own event loop, their tools offered as mcp__server__tool."""
