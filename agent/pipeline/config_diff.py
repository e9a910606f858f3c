"""Collateral changes in a rewritten config file: keys the rewrite removed or changed that the request does not
mention or says stay, keys it added where the request does not put them, and comment lines it dropped. A small model
rewriting a config file whole changed neighbouring keys, moved a twin key along with the one asked for, added a key
to the last section instead of the named one (docs/EVALS.md); Python files have their own check
(checks.lost_definitions)."""
from __future__ import annotations

import configparser
import difflib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from agent.pipeline.checks import REMOVES

MAX_REPORTED = 4
REWRITES = re.compile(r"\b(rewrite|merge|reformat|restructure|convert|regenerate)\b", re.IGNORECASE)
# A clause saying something is to stay as it is: "The web service stays on 2.7.0", "leave the rest alone".
KEEPS = re.compile(r"\b(stays?|keeps?|kept|leave|left|unchanged|untouched|alone|as (?:it|they) (?:is|are)|"
                   r"(?:do|does|must|should)(?: not|n't) (?:change|touch|move))\b", re.IGNORECASE)
CLAUSES = re.compile(r"\.(?=\s|$)|(?<!\d)\.(?!\d)|[;,!?\n]|\b(?:and|but|while|whereas)\b", re.IGNORECASE)
COMMENTED = {".ini": ("#", ";"), ".cfg": ("#", ";"), ".yaml": ("#",), ".yml": ("#",), ".toml": ("#",)}


def collateral_changes(request: str, path: Path, before: str | None, after: str) -> list[str]:
    """What the rewrite changed that the request does not ask for: dotted keys whose value it changed (or removed)
    although the request names neither the key nor the new value, or says they stay; keys it added under a section
    the request does not name while it names another; comment lines it dropped. [] for new files, other formats,
    unparseable text, or a request to rewrite the file; a request to remove, rename or move keys may drop them."""
    load = _LOADERS.get(path.suffix.lower())
    if load is None or before is None or REWRITES.search(request):
        return []
    try:
        old, new = _flatten(load(before)), _flatten(load(after))
    except Exception:  # noqa: BLE001 - any parser's error: the parse guard reports broken files
        return []
    words, kept = _words(request), _kept_words(request)
    named = lambda part: _named(part, words)  # noqa: E731
    out = []
    for key, value in old.items():
        if key in new and new[key] == value or key not in new and REMOVES.search(request):
            continue
        parts = [part for part in key.split(".") if not part.isdigit()]
        if any(_named(part, kept) for part in parts):
            out.append(key)  # the request names it as one that stays
        elif not any(named(part) for part in parts) and not (key in new and str(new[key]).lower() in request.lower()):
            out.append(key)
    sections = {part for key in old for part in key.split(".")[:-1] if not part.isdigit()}
    wanted = {s for s in sections if named(s)}
    for key in new:
        parents = [part for part in key.split(".")[:-1] if not part.isdigit()]
        if key not in old and parents and wanted and not any(named(part) for part in parents):
            out.append(f"{key} (added under {parents[-1]}, not where the request puts it)")
    left = set(_comments(after, path))
    gone = [line for line in _comments(before, path) if line not in left]
    out += [f"the comment line {line!r}" for line in gone[:2]]
    return out[:MAX_REPORTED]


def _named(part: str, words: set[str]) -> bool:
    """The request names this key part, in the singular or the plural ("script" for scripts)."""
    word = _norm(part)
    return bool(word) and (word in words or word.rstrip("s") in words or word + "s" in words)


def _kept_words(request: str) -> set[str]:
    """Words only the request's clauses about what stays use ("web" in "The web service stays on 2.7.0"; not
    "service", which the change's clause names too)."""
    keep, change = set(), set()
    for clause in CLAUSES.split(request):
        if clause and clause.strip():
            (keep if KEEPS.search(clause) else change).update(_words(clause))
    return {w for w in keep - change if not w.isdigit() and w not in _FILLER}


def _comments(text: str, path: Path) -> list[str]:
    marks = COMMENTED.get(path.suffix.lower(), ())
    return [line.strip() for line in text.splitlines() if marks and line.strip().startswith(marks)]


def _words(request: str) -> set[str]:
    """The request's words, and its runs of two or three words joined (for `pool size` -> pool_size)."""
    tokens = [t.lower() for t in re.findall(r"[A-Za-z0-9]+", request)]
    out = set(tokens)
    for n in (2, 3):
        out.update("".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1))
    out.update(_norm(t) for t in re.findall(r"[\w.-]+", request))
    return out


_FILLER = {"the", "a", "an", "on", "in", "at", "as", "is", "are", "it", "its", "to", "of", "stay", "stays", "keep",
           "keeps", "kept", "leave", "left", "unchanged", "untouched", "alone", "everything", "else", "rest", "other",
           "others", "all", "same", "do", "does", "not", "must", "should", "change", "touch"}


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out if out or not prefix else {prefix: {}}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}.{i}"))
        return out
    return {prefix: value}


def _ini(text: str) -> dict:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    return {s: dict(parser[s]) for s in parser.sections()} | ({"DEFAULT": dict(parser.defaults())}
                                                              if parser.defaults() else {})


_LOADERS = {".json": json.loads, ".yaml": yaml.safe_load, ".yml": yaml.safe_load, ".toml": tomllib.loads,
            ".ini": _ini, ".cfg": _ini}


def undo_collateral(request: str, path: Path, before: str | None, after: str) -> str:
    """`after` with the changes the request does not ask for undone where a line-level edit can: a hunk that only
    changed a key the request says stays (or never names) goes back to the original lines, and an INI key added
    under the wrong section moves to the end of the section the request names. A rewrite that did the asked-for
    change beside one of these then passes collateral_changes; anything else comes back as it was."""
    if _LOADERS.get(path.suffix.lower()) is None or before is None or \
            not collateral_changes(request, path, before, after):
        return after
    moved = _to_named_section(request, before, after) if path.suffix.lower() in (".ini", ".cfg") else after
    old, new = before.splitlines(keepends=True), moved.splitlines(keepends=True)
    pieces: list[tuple[list[str], list[str] | None]] = []  # (the rewrite's lines, the original's for an undo)
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "equal":
            pieces.append((new[j1:j2], None))
        elif op == "replace" and i2 - i1 == j2 - j1:
            pieces += [([b], [a]) for a, b in zip(old[i1:i2], new[j1:j2])]
        else:  # lines of one key pair up ("format = json" -> "format = text"); the rest go or come alone
            mine = {_key(b): b for b in new[j1:j2] if _key(b)}
            pairs = {a: mine.pop(_key(a)) for a in old[i1:i2] if _key(a) in mine}
            pieces += [([pairs[a]], [a]) if a in pairs else ([], [a]) for a in old[i1:i2]]
            pieces += [([b], []) for b in new[j1:j2] if b not in pairs.values()]
    undone: set[int] = set()
    text, left = moved, len(collateral_changes(request, path, before, moved))
    for k in [k for k, (_, back) in enumerate(pieces) if back is not None]:
        trial = "".join("".join(back if i in undone | {k} else mine) for i, (mine, back) in enumerate(pieces))
        fewer = _still_left(request, path, before, trial) if trial != before else None
        if fewer is not None and fewer < left:
            undone.add(k)
            text, left = trial, fewer
    return text if left == 0 else after


def _key(line: str) -> str | None:
    m = re.match(r"\s*([\w.-]+)\s*[=:]", line)
    return m.group(1).lower() if m else None


def _still_left(request: str, path: Path, before: str, candidate: str) -> int | None:
    """How many collateral changes `candidate` has; None when it does not parse (undoing a line alone broke it)."""
    try:
        _LOADERS[path.suffix.lower()](candidate)
    except Exception:  # noqa: BLE001 - any parser's error
        return None
    return len(collateral_changes(request, path, before, candidate))


def _to_named_section(request: str, before: str, after: str) -> str:
    """Key lines the rewrite added outside the one section of the file the request names, moved to that section's
    end (a small model appended `connect_timeout = 15` to the file's last section)."""
    words = _words(request)
    parsed = _ini(before)
    named = [s for s in parsed if s != "DEFAULT" and _named(s, words)]
    if len(named) != 1:
        return after
    lines = after.splitlines(keepends=True)
    old = set(before.splitlines())
    current, moved, kept = None, [], []
    for line in lines:
        header = re.match(r"\s*\[([^\]]+)\]", line)
        current = header.group(1).strip() if header else current
        key = _key(line)
        if not header and key and current != named[0] and line.rstrip("\n") not in old \
                and key not in parsed.get(current or "", {}):  # an added key, not a changed one
            moved.append(line if line.endswith("\n") else line + "\n")
        else:
            kept.append(line)
    if not moved:
        return after
    start = next((i for i, ln in enumerate(kept) if re.match(rf"\s*\[{re.escape(named[0])}\]", ln)), None)
    if start is None:  # the rewrite renamed or dropped that section: nowhere to move the keys to
        return after
    end = next((i for i in range(start + 1, len(kept)) if re.match(r"\s*\[", kept[i])), len(kept))
    while end > start + 1 and not kept[end - 1].strip():
        end -= 1
    if kept[end - 1] and not kept[end - 1].endswith("\n"):
        kept[end - 1] += "\n"
    out = "".join(kept[:end] + moved + kept[end:])
    return out.rstrip("\n") + "\n" if after.endswith("\n") else out.rstrip("\n")
