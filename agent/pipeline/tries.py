"""Verified tries: N candidate rewrites of a file decoded together, each checked against the real files, one kept.

A candidate is applied in place, checked (it parses, it keeps the file's definitions, the check commands pass
when the permission rules allow them without asking) and the file restored; the winner is the passing candidate
most others agree with, then the smallest change, then the highest mean log-probability. Only the winner enters
the conversation, as the model's Write.
"""
from __future__ import annotations

import difflib
import subprocess
from dataclasses import dataclass
from pathlib import Path

from agent.pipeline.checks import lost_definitions
from agent.pipeline.config_diff import collateral_changes
from tools._files import atomic_write
from tools._parse_guard import parse_problem

CHECK_TIMEOUT_S = 120


@dataclass
class Tried:
    index: int
    content: str
    mean_logprob: float
    passed: bool
    problem: str = ""  # why it failed, for the notes


def evaluate(candidates: list[tuple[str, float]], target: Path, original: str | None, request: str,
             commands: list[str], root: Path, env: dict[str, str]) -> list[Tried]:
    """Check each (content, mean log-probability) in place; the file is left as it was."""
    out = []
    try:
        for i, (content, logprob) in enumerate(candidates):
            problem = parse_problem(target, original, content)
            lost = lost_definitions(request, target, original, content) + \
                collateral_changes(request, target, original, content)
            if original is not None and _normal(content) == _normal(original):
                out.append(Tried(i, content, logprob, False, "unchanged"))  # passes any check, changes nothing
                continue
            if problem is not None or lost:
                why = problem.reason if problem is not None else f"dropped or changed {', '.join(lost)}"
                out.append(Tried(i, content, logprob, False, why))
                continue
            atomic_write(target, content.encode("utf-8"))
            failed = next((c for c in commands if not _passes(c, root, env)), None)
            out.append(Tried(i, content, logprob, failed is None, f"`{failed}` failed" if failed else ""))
    finally:
        if original is None:
            target.unlink(missing_ok=True)
        else:
            atomic_write(target, original.encode("utf-8"))
    return out


def choose(tried: list[Tried], original: str | None) -> Tried | None:
    """The passing candidate by agreement, then smallest change, then mean log-probability; None if none passed."""
    passing = [t for t in tried if t.passed]
    if not passing:
        return None
    votes = {}
    for t in passing:
        votes[_normal(t.content)] = votes.get(_normal(t.content), 0) + 1

    def change(t: Tried) -> float:
        return 1.0 - difflib.SequenceMatcher(None, original or "", t.content).ratio()
    return min(passing, key=lambda t: (-votes[_normal(t.content)], change(t), -t.mean_logprob))


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def _passes(command: str, root: Path, env: dict[str, str]) -> bool:
    try:
        r = subprocess.run(command, shell=True, cwd=root, env=env, capture_output=True, timeout=CHECK_TIMEOUT_S,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0
