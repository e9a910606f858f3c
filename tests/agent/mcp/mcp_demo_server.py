"""A small MCP server for the tests, written with the SDK's MCPServer (FastMCP in mcp 1.x).

python mcp_demo_server.py [stdio | http PORT | sse PORT]
"""
import os
import sys
import time

from mcp.server.mcpserver import MCPServer

app = MCPServer("demo")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def echo(text: str) -> str:
    """Repeat the text, with the server's DEMO_GREETING environment variable in front."""
    return os.environ.get("DEMO_GREETING", "") + text


@app.tool()
def big(n: int) -> str:
    """Return n characters."""
    return "x" * n


@app.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "done"


@app.tool()
def crash() -> str:
    """Exit the server process at once."""
    print("demo server: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@app.tool()
def fail() -> str:
    """Raise an error."""
    raise ValueError("the demo tool failed")


@app.tool()
def weird(x: int) -> str:
    """A tool whose input schema is replaced below by a malformed one (DEMO_WEIRD=1)."""
    return str(x)


if __name__ == "__main__":
    if os.environ.get("DEMO_WEIRD"):
        app._tool_manager._tools["weird"].parameters = {"type": "object", "properties": ["x"]}
    else:
        app.remove_tool("weird")
    kind = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if kind == "http":
        app.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif kind == "sse":
        app.run(transport="sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
