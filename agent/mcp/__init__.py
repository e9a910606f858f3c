"""MCP client: servers from .mcp.json and settings on their own event loop; tools offered as mcp__server__tool."""
