"""Bug patterns a linter sees at once and a small model reading the code does not: a mutable default argument
shared between calls, a comparison whose result is thrown away, a loop variable captured late. ruff checks the
file's text (nothing of the project runs) with a fixed set of rules that flag likely bugs, not style; the
findings lead the note of a request that reports a failure."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ruff import find_ruff_bin

# Rules whose hits are bugs far more often than style: flake8-bugbear's, pyflakes' name and comparison checks,
# pylint's errors and self-assignments. Unused imports and redefined loop names stay out (idiomatic code has them).
RULES = ("B006", "B015", "B018", "B020", "B023", "B031", "B033", "F601", "F631", "F632", "F811", "F821", "F823",
         "F841", "PLE", "PLW0120", "PLW0127", "PLW0128")
LINT_TIMEOUT_S = 10
MAX_FINDINGS = 3
# Rules whose fix ruff writes itself and which change behaviour only where the bug was: a mutable default argument
# becomes None and a fresh object per call (an "unsafe" fix: callers that relied on sharing change), `is` against a
# literal becomes `==`.
FIXABLE = ("B006", "F632")


def ruff_binary() -> str | None:
    try:
        return find_ruff_bin()
    except FileNotFoundError:
        return None


def bug_findings(text: str | None, path: Path, name: str) -> list[str]:
    """One sentence per likely bug in a Python file's text ("inventory.py line 4: Do not use mutable data
    structures for argument defaults (`def parse_stock(lines, stock={}):`); fix: ...");
    empty when it is not Python, has none, or ruff is missing or fails."""
    return [sentence for _, sentence in _findings(text, path, name)][:MAX_FINDINGS]


def ruff_fixed(text: str | None, path: Path, name: str) -> tuple[str, list[str]] | None:
    """ruff's own fix of the FIXABLE bug patterns in a Python file's text and the findings it fixed, or None when
    it is not Python, ruff finds nothing it can fix, or ruff is missing or fails. The file is not touched."""
    found = [sentence for code, sentence in _findings(text, path, name) if code in FIXABLE]
    binary = ruff_binary() if found else None
    if binary is None:
        return None
    argv = [binary, "check", "--isolated", "--no-cache", "--select", ",".join(FIXABLE), "--fix", "--unsafe-fixes",
            "--quiet", "--stdin-filename", str(path), "-"]
    try:
        done = subprocess.run(argv, input=text.encode("utf-8"), capture_output=True, timeout=LINT_TIMEOUT_S)
        fixed = done.stdout.decode("utf-8")
    except (OSError, subprocess.TimeoutExpired, UnicodeDecodeError):
        return None
    return (fixed, found) if fixed.strip() and fixed != text else None


def _findings(text: str | None, path: Path, name: str) -> list[tuple[str, str]]:
    """(rule code, sentence) per finding of RULES."""
    binary = ruff_binary() if text is not None and path.suffix == ".py" else None
    if binary is None:
        return []
    argv = [binary, "check", "--isolated", "--no-cache", "--select", ",".join(RULES), "--output-format", "json",
            "--stdin-filename", str(path), "-"]
    try:
        done = subprocess.run(argv, input=text.encode("utf-8"), capture_output=True, timeout=LINT_TIMEOUT_S)
        rows = json.loads(done.stdout or b"[]")
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return []
    lines, out = text.splitlines(), []
    for row in rows if isinstance(rows, list) else []:
        try:
            start, message, code = row["location"], row["message"].rstrip("."), str(row.get("code") or "")
        except (KeyError, TypeError):
            continue
        if not code.startswith(RULES):  # a syntax error is the parse guard's to report
            continue
        flagged = _span(lines, start)
        fix = (row.get("fix") or {}).get("message") or ""
        out.append((code, f"{name} line {start['row']}: {message}" + (f" (`{flagged}`)" if flagged else "") +
                    (f"; fix: {fix}" if fix else "")))
    return out


def _span(lines: list[str], start: dict) -> str:
    """The flagged line, when it is short (a default value alone does not say whose it is)."""
    row = start.get("row") if isinstance(start, dict) else None
    if not isinstance(row, int) or not 1 <= row <= len(lines):
        return ""
    text = lines[row - 1].strip()
    return text if 0 < len(text) <= 100 else ""

