"""WebFetch: fetch a URL and return its content as Markdown, with Claude Code's name and fields (url, prompt).

Claude Code hands the page and the prompt to a small model and returns its answer. The model here is
local, so the page itself (as Markdown, capped) comes back with the prompt in front and the model answers
from it in the same turn. Redirects within a host are followed and reported; one to another host is
returned to the model, not followed, so the next fetch goes through the permission check for that host.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar
from urllib.parse import urljoin, urlparse

import httpx
from bs4 import BeautifulSoup
from markdownify import MarkdownConverter

from tools._args import check_args
from tools.base import ToolContext, ToolResult

TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml", "application/javascript",
              "application/x-yaml", "application/yaml", "application/ld+json", "application/rss+xml",
              "application/atom+xml")


class _FetchError(Exception):
    """A fetch that ends without content; the message is for the model."""


@dataclass
class WebFetchTool:
    timeout_s: float = 30.0  # the whole fetch, redirects and body included
    max_bytes: int = 5_000_000  # body read at most (the rest is dropped)
    max_chars: int = 40_000  # Markdown returned at most
    max_redirects: int = 5

    name: ClassVar[str] = "WebFetch"
    read_only: ClassVar[bool] = True  # changes nothing here; the permission layer still asks per domain
    description: ClassVar[str] = (
        "Fetch a web page (http or https) and return its content as Markdown, with your prompt in front so you "
        "can answer it from the page. Redirects to another host are reported, not followed: fetch the new URL "
        "yourself if you still want it.")
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "The URL to fetch (http:// or https://)"},
            "prompt": {"type": "string", "description": "What you want to learn from the page"},
        },
        "required": ["url", "prompt"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        args, error = check_args(self.input_schema, args)
        if error:
            return ToolResult(error, is_error=True)
        url = args["url"].strip()
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            return ToolResult(f"Not an http(s) URL: {url!r}.", is_error=True)
        deadline = time.monotonic() + self.timeout_s
        try:
            headers = {"User-Agent": "agent-webfetch/1.0", "Accept": "text/html, text/*;q=0.9, */*;q=0.5"}
            with httpx.Client(follow_redirects=False, timeout=self.timeout_s, headers=headers) as client:
                return self._fetch(client, url, args["prompt"], deadline, ctx)
        except _FetchError as e:
            return ToolResult(str(e), is_error=True, data={"url": url})
        except httpx.TimeoutException:
            return ToolResult(f"Fetching {url} timed out after {self.timeout_s:g}s.", is_error=True, data={"url": url})
        except httpx.HTTPError as e:
            return ToolResult(f"Fetching {url} failed: {type(e).__name__}: {e}.", is_error=True, data={"url": url})

    def _fetch(self, client: httpx.Client, url: str, prompt: str, deadline: float, ctx: ToolContext) -> ToolResult:
        redirects: list[str] = []
        for _ in range(self.max_redirects + 1):
            with client.stream("GET", url) as response:
                if response.is_redirect:
                    target = urljoin(url, response.headers.get("location", ""))
                    if not _same_host(url, target):
                        text = (f"{url} redirected ({response.status_code}) to another host: {target}\n"
                                f"It was not followed. To fetch it, call WebFetch again with url \"{target}\" "
                                "and the same prompt.")
                        return ToolResult(text, data={"url": url, "redirect": target, "status": response.status_code})
                    redirects.append(f"{url} -> {target} ({response.status_code})")
                    url = target
                    continue
                body, truncated = self._read(response, deadline, ctx)
                return self._result(response, url, prompt, body, truncated, redirects)
        raise _FetchError(f"Too many redirects (over {self.max_redirects}): {' ; '.join(redirects)}")

    def _read(self, response: httpx.Response, deadline: float, ctx: ToolContext) -> tuple[bytes, bool]:
        """The body up to max_bytes; the overall time cap and the interrupt apply while it streams."""
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            if time.monotonic() > deadline:
                raise _FetchError(f"Fetching {response.url} timed out after {self.timeout_s:g}s.")
            if ctx.cancel.is_set():
                raise _FetchError(f"Fetching {response.url} was interrupted.")
            chunks.append(chunk)
            size += len(chunk)
            if size >= self.max_bytes:
                return b"".join(chunks)[: self.max_bytes], True
        return b"".join(chunks), False

    def _result(self, response: httpx.Response, url: str, prompt: str, body: bytes, truncated: bool,
                redirects: list[str]) -> ToolResult:
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        data = {"url": url, "status": response.status_code, "content_type": kind, "bytes": len(body),
                "redirects": redirects}
        if kind and not kind.startswith(TEXT_TYPES):
            return ToolResult(f"{url} returned {kind} content ({len(body):,} bytes), which is not text; "
                              "WebFetch reads web pages and text only.", is_error=True, data=data)
        text = body.decode(response.encoding or "utf-8", errors="replace")
        if kind in ("text/html", "application/xhtml+xml") or not kind and "<html" in text[:1000].lower():
            soup = BeautifulSoup(text, "html.parser")
            for tag in soup(["script", "style", "noscript", "template", "svg"]):  # code and styling, not content
                tag.decompose()
            text = MarkdownConverter(heading_style="ATX").convert_soup(soup)
            text = "\n".join(line.rstrip() for line in text.splitlines())
            while "\n\n\n" in text:
                text = text.replace("\n\n\n", "\n\n")
        text = text.strip()
        if len(text) > self.max_chars:
            text, truncated = text[: self.max_chars], True
        head = [f"URL: {url}"] + [f"Redirected: {r}" for r in redirects]
        if response.status_code >= 400:
            head.append(f"HTTP {response.status_code} {response.reason_phrase}")
        cut = f"[Content cut at {self.max_chars:,} characters or {self.max_bytes:,} bytes.]"
        notes = ["", cut] if truncated else []
        content = "\n".join(head + [f"Prompt: {prompt}", "", "Content (Markdown):", "", text] + notes)
        return ToolResult(content, is_error=response.status_code >= 400, data=data)


def _same_host(a: str, b: str) -> bool:
    """The same host, ignoring a leading www. (as Claude Code does); the scheme may go http -> https."""
    ha, hb = (urlparse(u).hostname or "" for u in (a, b))
    return ha.removeprefix("www.") == hb.removeprefix("www.") and urlparse(b).scheme in ("http", "https")
