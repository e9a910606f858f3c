"""McpManager: the configured MCP servers, connected in parallel on one event-loop thread.

The SDK is async and the tool layer is synchronous, so the manager owns an asyncio loop on a daemon
thread; each server lives in one task there (its transport and session are entered and left in that
task), and `call` is a blocking call with a timeout that the interrupt event can cut short. Failures
become one-line messages: a server that will not start, a crash, a timeout.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import tempfile
import threading
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import anyio
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from agent.mcp.config import ServerConfig

STATUSES = ("pending", "connected", "failed", "needs-approval", "disabled")
SDK_TIMEOUT_MARGIN_S = 5.0  # the SDK's read timeout is ours plus this (ours reports; the SDK's is the backstop)


class McpCallError(Exception):
    """A tool call that did not reach an answer (server down, timeout, protocol error); one line."""


@dataclass
class ServerState:
    config: ServerConfig
    status: str = "pending"  # one of STATUSES
    error: str = ""  # why it failed, one line
    tools: list[mcp_types.Tool] = field(default_factory=list)
    client: Client | None = None
    stop: asyncio.Event | None = None
    errlog: Any = None  # the server's stderr (stdio), kept for the failure message
    ready: threading.Event = field(default_factory=threading.Event)  # set once it is no longer pending
    task: concurrent.futures.Future | None = None  # its task on the loop (starting, connected or closing)


class McpManager:
    """Starts servers, lists their tools, calls them; `close` stops them all."""

    def __init__(self, servers: list[ServerConfig], *, cwd: str, environ: Mapping[str, str],
                 startup_timeout_s: float = 30.0, notify: Callable[[str], None] | None = None) -> None:
        self.servers = {s.name: ServerState(s) for s in servers}
        self.cwd, self.environ = cwd, dict(environ)
        self.startup_timeout_s = startup_timeout_s
        self.notify = notify or (lambda text: None)
        self.listeners: list[Callable[[str], None]] = []  # called with a server name when its status changes
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._thread.start()

    # ---- lifecycle

    def start(self, names: list[str] | None = None) -> None:
        """Connect the named servers (default: all) in parallel; returns at once. Running ones are left alone."""
        for name in names if names is not None else list(self.servers):
            state = self.servers[name]
            if state.task is not None and not state.task.done():
                if state.status != "failed":
                    continue  # starting or connected
                try:  # a failed server's task is closing its session: let it finish first
                    state.task.result(timeout=10)
                except Exception:
                    pass
            state.status, state.error = "pending", ""
            state.ready.clear()
            state.task = asyncio.run_coroutine_threadsafe(self._serve(state), self._loop)

    def hold(self, name: str, status: str) -> None:
        """Mark a server not started: needs-approval or disabled."""
        state = self.servers[name]
        state.status = status
        state.ready.set()

    def wait(self, timeout_s: float | None = None) -> None:
        """Block until no server is still starting (at most timeout_s; default the startup timeout + 5 s)."""
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.startup_timeout_s + 5)
        for state in self.servers.values():
            state.ready.wait(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        """Stop every server (process groups of stdio servers end with their sessions), then the loop."""
        if not self._loop.is_running():
            return
        stops = [s for s in self.servers.values() if s.stop is not None]
        for state in stops:
            self._loop.call_soon_threadsafe(state.stop.set)
        future = asyncio.run_coroutine_threadsafe(self._drain(), self._loop)
        try:
            future.result(timeout=10)
        except (concurrent.futures.TimeoutError, Exception):
            pass  # a server that will not stop must not hold the exit
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    async def _drain(self) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if tasks:
            await asyncio.wait(tasks, timeout=8)

    # ---- calls

    def call(self, server: str, tool: str, arguments: dict, *, timeout_s: float,
             cancel: threading.Event | None = None) -> mcp_types.CallToolResult:
        """The server's answer; McpCallError (one line) when there is none."""
        state = self.servers.get(server)
        if state is None or state.status != "connected" or state.client is None:
            why = f" ({state.error})" if state and state.error else ""
            raise McpCallError(f"MCP server {server!r} is not connected: {state.status if state else 'unknown'}{why}")
        # The SDK's own read timeout is the backstop: ours (the deadline below) must fire first, or a loaded
        # machine reports the SDK's "Request timed out" instead of the one-line timeout.
        future = asyncio.run_coroutine_threadsafe(
            state.client.call_tool(tool, arguments, read_timeout_seconds=timeout_s + SDK_TIMEOUT_MARGIN_S), self._loop)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return future.result(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
            except concurrent.futures.TimeoutError:
                if cancel is not None and cancel.is_set():
                    future.cancel()
                    raise McpCallError(f"MCP tool {tool} on {server!r} was interrupted") from None
                if time.monotonic() >= deadline:
                    future.cancel()
                    raise McpCallError(f"MCP tool {tool} on {server!r} timed out after {timeout_s:g}s") from None
            except Exception as e:
                if _connection_lost(e):
                    tail = self._stderr_tail(state)
                    self._fail(state, f"the server stopped{tail}")
                    raise McpCallError(f"MCP server {server!r} stopped during the call to {tool}{tail}") from None
                raise McpCallError(f"MCP tool {tool} on {server!r} failed: {_one_line(e)}") from None

    # ---- one server's task

    async def _serve(self, state: ServerState) -> None:
        state.stop = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                try:
                    async with asyncio.timeout(self.startup_timeout_s):
                        client = await stack.enter_async_context(Client(await self._transport(state, stack)))
                        listing = await client.list_tools()
                except TimeoutError:
                    self._fail(state, f"did not start within {self.startup_timeout_s:g}s{self._stderr_tail(state)}")
                    return
                except Exception as e:
                    self._fail(state, f"{_one_line(e)}{self._stderr_tail(state)}")
                    return
                state.client, state.tools = client, list(listing.tools)
                state.status, state.error = "connected", ""
                state.ready.set()
                self._changed(state)
                await state.stop.wait()
        except Exception as e:  # leaving the session of a server that crashed: already reported by the call
            if state.status == "connected":
                self._fail(state, _one_line(e))
        finally:
            state.client = None
            state.ready.set()

    async def _transport(self, state: ServerState, stack: AsyncExitStack):
        cfg = state.config
        if cfg.transport == "stdio":
            state.errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
            stack.callback(state.errlog.close)
            params = StdioServerParameters(command=cfg.command, args=list(cfg.args), env=self.environ | cfg.env,
                                           cwd=self.cwd)
            return stdio_client(params, errlog=state.errlog)
        if cfg.transport == "sse":
            return sse_client(cfg.url, headers=cfg.headers or None)
        http = await stack.enter_async_context(create_mcp_http_client(headers=cfg.headers or None))
        return streamable_http_client(cfg.url, http_client=http)

    # ---- state changes

    def _fail(self, state: ServerState, error: str) -> None:
        state.status, state.error, state.tools = "failed", error, []
        state.ready.set()
        if state.stop is not None:  # end its task, so that a later start() can connect again
            self._loop.call_soon_threadsafe(state.stop.set)
        self.notify(f"MCP server {state.config.name!r} failed: {error}")
        self._changed(state)

    def _changed(self, state: ServerState) -> None:
        for listener in list(self.listeners):
            listener(state.config.name)

    @staticmethod
    def _stderr_tail(state: ServerState) -> str:
        """`: <the server's last stderr line>` for stdio servers that wrote one."""
        log = state.errlog
        if log is None or log.closed:
            return ""
        try:
            log.flush()
            log.seek(0)
            lines = [line.strip() for line in log.read()[-4000:].splitlines() if line.strip()]
        except (OSError, ValueError):
            return ""
        return f": {lines[-1][:200]}" if lines else ""


def _connection_lost(e: BaseException) -> bool:
    """Whether a call failed because the session is gone (a stdio server that exited, a closed connection)."""
    return isinstance(e, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)) \
        or "connection closed" in str(e).lower()


def _one_line(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup) and e.exceptions:
        return _one_line(e.exceptions[0])
    text = " ".join(str(e).split()) or type(e).__name__
    return text[:300]
