"""A literal change the request spells out, made by the harness: "greet.py says 'Helo' instead of 'Hello'", "change
'localhost' to '0.0.0.0' in app.ini", "the label 'Totl' should be 'Total'", "change the port from 8080 to 9090".
The old text is found in the files the route chose to edit and replaced where it stands; the parse guard and the
request's check then run as for any edit (refactor.apply). The 0.5B asked to fix such a typo rewrote the file
without the fix, dropped its main block, and ended on a runaway Edit call (docs/EVALS.md)."""
from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

QUOTED = r"(?<![\w'\"`])(?P<{0}q>['\"`‘“])(?P<{0}>[^'\"`‘’“”\n]{{1,80}}?)['\"`’”](?![\w'\"`])"
A, B = QUOTED.format("a"), QUOTED.format("b")
# A token of a "from X to Y" change: a number, a version, a word ("from 8080 to 9090", "from 2 to 5").
TOKEN = r"(?P<{0}>[\w\-:/][\w.\-:/]{{0,39}})"
DESCRIBES = r"\b(?:says|prints|shows|returns|outputs|reads|displays|writes|uses|has|contains|gives|is)"
# A change of a value: "change the port from 8080 to 9090", "raise the replicas from 2 to 5" (not "copy x from a to b").
SENTENCE = r"(?:[^.\n]|\.(?=\S)){0,80}?"  # within one sentence ("app.ini" is not its end)
CHANGES = rf"\b(?:change|raise|lower|increase|decrease|reduce|bump|switch|update|set|make)\b{SENTENCE}"
RELATIONS = (
    # "'A' instead of 'B'": which one the files hold decides which is old
    ("either", re.compile(rf"{A}\s+(?:instead\s+of|rather\s+than)\s+{B}", re.IGNORECASE)),
    ("a_old", re.compile(rf"{A}\s+(?:should|must|ought\s+to|needs?\s+to)\s+(?:be|read|say)\s+{B}", re.IGNORECASE)),
    # not "set"/"update": "set 'debug' to 'true'" names a key, not the text to replace
    ("a_old", re.compile(rf"\b(?:change|replace|correct|fix|switch|turn)\b{SENTENCE}{A}\s+"
                         rf"(?:to|with|into|by)\s+{B}", re.IGNORECASE)),
    ("a_old", re.compile(rf"{CHANGES}\bfrom\s+{A}\s+to\s+{B}", re.IGNORECASE)),
    ("a_old", re.compile(rf"{CHANGES}\bfrom\s+{TOKEN.format('a')}\s+to\s+{TOKEN.format('b')}(?=[\s,;:!?)]|\.\s|\.?$)",
                         re.IGNORECASE)),
)
NOT_HERE = re.compile(r"\b(?:rename|move)\b", re.IGNORECASE)  # identifiers and definitions: rename.py and move.py
MAX_PLACES = 5  # a quoted text in more places than this is not one change the request could mean everywhere
WORDS = re.compile(r"[a-z]{3,}")
COMMON = frozenset("the and for from with this that into change raise lower increase decrease reduce bump switch "
                   "update set make file value number".split())
KEY = re.compile(r"\s*[:=]")  # the text stands where a key does: "set 'debug' ..." is not a value to replace


@dataclass
class Replace:
    old: str
    new: str
    places: int = 0
    texts: dict[Path, str] = field(default_factory=dict)

    def summary(self, rel: Callable[[Path], str]) -> str:
        where = ", ".join(rel(p) for p in self.texts)
        return f"Replaced {self.old!r} with {self.new!r} in {where} ({self.places} place{'s' * (self.places != 1)})"


def plan_replace(prompt: str, targets: list[Path]) -> Replace | None:
    """The replacement the request spells out, with each changed target's new text; None when it spells none out,
    the old text is in none of the targets, or where it stands is not clear (the model's edit steps then run)."""
    if NOT_HERE.search(prompt):
        return None
    texts = {}
    for path in targets:
        try:
            texts[path] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    for how, pattern in RELATIONS:
        for m in pattern.finditer(prompt):
            quoted = m.groupdict().get("aq") is not None
            a, b = m.group("a"), m.group("b") if quoted else m.group("b").rstrip(".")  # a sentence's full stop
            if a == b or not a.strip() or not b.strip():
                continue
            pairs = [(a, b), (b, a)] if how == "either" else [(a, b)]
            if how == "either" and re.search(rf"{DESCRIBES}\s*$", prompt[:m.start()], re.IGNORECASE):
                pairs = pairs[:1]  # "says 'A' instead of 'B'": the files hold A
            found = [r for old, new in pairs if (r := _replace(old, new, texts, prompt, quoted)) is not None]
            if len(found) == 1:
                return found[0]
    return None


def _replace(old: str, new: str, texts: dict[Path, str], prompt: str, quoted: bool) -> Replace | None:
    """old -> new in every place a quoted text stands (up to MAX_PLACES); an unquoted token only in its one place,
    found by the words of the request on its line when it stands in several."""
    left = r"\b" if re.match(r"\w", old) else ""
    right = r"\b" if re.search(r"\w$", old) else ""
    pattern = re.compile(left + re.escape(old) + right)
    hits = {}
    for p, t in texts.items():
        spans = _text_spans(t) if p.suffix == ".py" else None  # in Python code only strings and comments
        hits[p] = [m for m in pattern.finditer(t) if not KEY.match(t, m.end())
                   and (spans is None or any(a <= m.start() and m.end() <= b for a, b in spans))]
    hits = {p: h for p, h in hits.items() if h}
    places = sum(len(h) for h in hits.values())
    if not places:
        return None
    if not quoted and places > 1:
        hits = _by_request_words(hits, texts, prompt)
        places = sum(len(h) for h in hits.values())
        if places != 1:
            return None
    if places > MAX_PLACES:
        return None
    out = Replace(old, new, places)
    for path, found in hits.items():
        text = texts[path]
        for m in reversed(found):
            text = text[:m.start()] + new + text[m.end():]
        out.texts[path] = text
    return out


def _by_request_words(hits: dict[Path, list[re.Match]], texts: dict[Path, str], prompt: str) -> dict:
    """The hits whose line shares a word with the request ("the port" -> `port = 8080`)."""
    words = set(WORDS.findall(prompt.lower())) - COMMON
    kept = {}
    for path, found in hits.items():
        text = texts[path]
        on = [m for m in found if words & set(WORDS.findall(_line_of(text, m.start()).lower()))]
        if on:
            kept[path] = on
    code = {p: c for p, found in kept.items() if (c := [m for m in found if not _comment(texts[p], m.start())])}
    return code or kept  # a comment that mentions the value is not the setting


def _line_of(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return text[start:end if end >= 0 else len(text)]


def _comment(text: str, offset: int) -> bool:
    return _line_of(text, offset).lstrip().startswith(("#", ";", "//"))


def _text_spans(text: str) -> list[tuple[int, int]]:
    """Offsets of a Python file's strings and comments: a name in code is rename.py's (with its uses and
    importers). None of them when it does not tokenize."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    try:
        return [(starts[t.start[0] - 1] + t.start[1], starts[t.end[0] - 1] + t.end[1])
                for t in tokenize.generate_tokens(io.StringIO(text).readline)
                if t.type in (tokenize.STRING, tokenize.COMMENT)]
    except (tokenize.TokenError, SyntaxError):
        return []
