"""What a run left behind, for verifiers and metrics: the project copy, result objects and transcripts.

Verifiers get a RunView and assert on the final state (files, git, commands they run themselves,
tool results recorded in the transcript); the agent's answer counts only where the task asks for
a value that only reading the project could give.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

# Tool results that mean the model's call itself was bad (agent/loop.py and tools/_args.py wording).
MALFORMED_PREFIXES = ("Error: your tool call could not be parsed", "Error: there is no tool named",
                      "Error: invalid arguments for", "Arguments must be a JSON object",
                      "Missing required argument", "Argument ")
# A reply that is (or carries) a tool call written as text: it never ran.
# Also in parentheses: the 0.5B's forced-text answers at 2c3aae2 were `({"name": "Read", ...}` twice.
_CALL_TEXT = re.compile(r"<tool_call>|^\s*\(?\s*(```(json)?\s*)?\{\s*\"name\"\s*:", re.S)
# The pipeline's verified tries, as stream-json reports each sampled round: "4 candidates, 1 passed, applied #3".
_TRIES = re.compile(r"^(\d+) candidates, (\d+) passed\b")


@dataclass
class RunView:
    """The state a verifier checks. `answer` is the final text of the last prompt's run."""
    dir: Path  # the project copy the agent worked in
    fixture: Path  # the untouched fixture, for "unchanged" checks
    results: list[dict] = field(default_factory=list)  # result objects, one per prompt that finished
    transcript: list[dict] = field(default_factory=list)  # transcript entries of the session, in order
    stream: list[dict] = field(default_factory=list)  # stream-json lines of every prompt's process

    @property
    def answer(self) -> str:
        return str(self.results[-1].get("result") or "") if self.results else ""

    @property
    def ok(self) -> bool:
        """Every prompt finished with subtype success."""
        return bool(self.results) and all(r.get("subtype") == "success" for r in self.results)

    @property
    def messages(self) -> list[dict]:
        return [e["message"] for e in self.transcript
                if e.get("type") == "message" and isinstance(e.get("message"), dict)]

    @property
    def tool_calls(self) -> list[dict]:
        """[{"id", "name", "arguments"}] for every call the model made, in order."""
        return [{"id": c.get("id"), "name": c["function"]["name"], "arguments": c["function"].get("arguments") or {}}
                for m in self.messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]

    @property
    def tool_results(self) -> list[dict]:
        """[{"id", "name", "content", "is_error"}] for every tool result, in order."""
        errors = {b.get("tool_use_id"): bool(b.get("is_error")) for line in self.stream if line.get("type") == "user"
                  for b in (line.get("message") or {}).get("content") or [] if isinstance(b, dict)}
        return [{"id": m.get("tool_call_id"), "name": m.get("name"), "content": str(m.get("content") or ""),
                 "is_error": errors.get(m.get("tool_call_id"), str(m.get("content") or "").startswith("Error"))}
                for m in self.messages if m.get("role") == "tool"]

    def calls(self, name: str) -> list[dict]:
        """Arguments of every call to tool `name`."""
        return [c["arguments"] for c in self.tool_calls if c["name"] == name]

    def succeeded(self, name: str) -> list[tuple[dict, str]]:
        """(arguments, result text) of every call to `name` that ran without an error result."""
        failed = {r["id"] for r in self.tool_results if r["is_error"]}
        return [(c["arguments"], self.result_of(c["id"])) for c in self.tool_calls
                if c["name"] == name and c["id"] not in failed and any(r["id"] == c["id"] for r in self.tool_results)]

    def result_of(self, call_id: str) -> str:
        return next((r["content"] for r in self.tool_results if r["id"] == call_id), "")

    def path(self, rel: str) -> Path:
        return self.dir / rel

    def exists(self, rel: str) -> bool:
        return (self.dir / rel).exists()

    def text(self, rel: str) -> str:
        p = self.dir / rel
        return p.read_text(encoding="utf-8", errors="replace") if p.is_file() else ""

    def original(self, rel: str) -> str:
        return (self.fixture / rel).read_text(encoding="utf-8")

    def json(self, rel: str):
        try:
            return json.loads(self.text(rel))
        except json.JSONDecodeError:
            return None

    def sh(self, command: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run `command` with bash in the copy; output captured as text."""
        return subprocess.run(["bash", "-c", command], cwd=self.dir, capture_output=True, text=True, timeout=timeout)

    def python(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], cwd=self.dir, capture_output=True, text=True, timeout=timeout)

    def pytest(self, *args: str) -> subprocess.CompletedProcess:
        """pytest in the copy, without writing a cache there."""
        return self.python("-m", "pytest", "-q", "-p", "no:cacheprovider", *args)


def read_transcript(path: Path) -> list[dict]:
    """Transcript entries; unreadable lines (a crash mid-write) are skipped."""
    entries = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def is_malformed(result_content: str) -> bool:
    return result_content.startswith(MALFORMED_PREFIXES)


def looks_like_call(text: str) -> bool:
    """A final answer that is a tool call written as text (it never ran)."""
    return bool(_CALL_TEXT.search(text or ""))


def metrics(view: RunView) -> dict:
    """Counts for one run (all its prompts): turns, calls, malformed calls, tokens."""
    usage = {k: 0 for k in ("reused_tokens", "prefilled_tokens", "drafted_tokens", "accepted_tokens",
                            "output_tokens")}
    for r in view.results:
        for k in usage:
            usage[k] += int((r.get("usage") or {}).get(k) or 0)
    answers = [str(r.get("result") or "") for r in view.results if r.get("subtype") == "success"]
    sampled, passed = first_round(view.stream)
    return {"turns": sum(int(r.get("num_turns") or 0) for r in view.results),
            "tool_calls": len(view.tool_calls),
            "malformed_calls": sum(is_malformed(r["content"]) for r in view.tool_results),
            "text_calls": sum(looks_like_call(a) for a in answers),
            **usage, "first_candidates": sampled, "first_passed": passed}


def first_round(stream: list[dict]) -> tuple[int, int]:
    """(candidates sampled, candidates that passed their check) in a run's first sampled round; (0, 0) without one.
    Its candidates are independent samples of one prompt (later rounds see the nearest miss), so the share that
    passes measures a prompt with more signal than six stub tasks' verdicts (docs/EVALS.md, stop 31)."""
    for line in stream:
        if line.get("subtype") == "pipeline_step" and line.get("step") == "tries":
            if m := _TRIES.match(str(line.get("detail") or "")):
                return int(m.group(1)), int(m.group(2))
    return 0, 0
