"""Where an Edit's old_string is: exactly, without Read's line-number gutters, or ignoring whitespace.

Small models copy Read's gutter, get indentation wrong, or write a multi-line block on one line. A unique
tolerant match replaces the file's real lines; anything else is an error that shows the closest region.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from tools._files import numbered

GUTTER = re.compile(r"^ *(\d+)\t")  # Read's `{n:>6}\t` before each line
_BARE_GUTTER = re.compile(r"^ *(\d+)$")  # an empty line's gutter with its tab trimmed away
_WORD = re.compile(r"\w+")


class EditError(Exception):
    """An edit that cannot be applied; the message is for the model."""


@dataclass(frozen=True)
class Span:
    start: int  # character offsets of the replaced text
    end: int
    new: str
    first_line: int  # 1-based lines of the replaced text
    last_line: int


@dataclass(frozen=True)
class Match:
    kind: str  # "exact" | "gutter" | "whitespace"
    spans: tuple[Span, ...]
    gutter: bool = False  # Read's gutters were stripped first (kind "whitespace" can say so too)

    def apply(self, text: str) -> str:
        for s in reversed(self.spans):
            text = text[:s.start] + s.new + text[s.end:]
        return text

    def note(self) -> str:
        """'matched ignoring whitespace at lines 12-14'; '' for an exact match."""
        if self.kind == "exact":
            return ""
        how = {"gutter": "without Read's line numbers", "whitespace": "ignoring whitespace"}[self.kind]
        if self.kind == "whitespace" and self.gutter:
            how = "without Read's line numbers and ignoring whitespace"
        lines = ", ".join(str(s.first_line) if s.first_line == s.last_line else f"{s.first_line}-{s.last_line}"
                          for s in self.spans)
        return f"matched {how} at line{'s' * (len(self.spans) > 1 or '-' in lines)} {lines}"


def find(text: str, old: str, new: str, replace_all: bool = False) -> Match:
    """Where `old` is in `text` and what replaces it; raises EditError naming the closest region."""
    if old == new:
        raise EditError("old_string and new_string are identical; there is nothing to change.")
    count = text.count(old)
    if count == 1 or (count and replace_all):
        return Match("exact", _exact_spans(text, old, new))
    if count:
        raise EditError(_occurs(text, old, count))
    stripped = strip_gutters(old)
    if stripped is not None:
        old, new = stripped, _strip_new_gutters(new)
        if old == new:
            raise EditError("Without Read's line-number prefixes, old_string and new_string are identical; "
                            "there is nothing to change.")
        count = text.count(old)
        if count == 1 or (count and replace_all):
            return Match("gutter", _exact_spans(text, old, new), gutter=True)
        if count:
            raise EditError("Without Read's line-number prefixes, " + _occurs(text, old, count))
    windows = _loose_windows(text.split("\n"), old)
    if len(windows) == 1 or (windows and replace_all):
        return Match("whitespace", _loose_spans(text, windows, old, new), gutter=stripped is not None)
    if windows:
        where = ", ".join(f"{a + 1}-{b}" if b - a > 1 else str(a + 1) for a, b in windows)
        raise EditError(f"old_string is not in the file as written, and ignoring whitespace it matches {len(windows)} "
                        f"places (lines {where}). Copy the text exactly as the file has it, with surrounding lines "
                        "to make it unique, or set replace_all to true to change every occurrence.")
    raise EditError(_not_found(text, old, stripped is not None))


def _occurs(text: str, old: str, count: int) -> str:
    starts = ", ".join(str(s.first_line) for s in _exact_spans(text, old, ""))
    return (f"old_string occurs {count} times (lines {starts}). Add surrounding lines to old_string to make it "
            "unique, or set replace_all to true to change every occurrence.")


def _exact_spans(text: str, old: str, new: str) -> tuple[Span, ...]:
    spans, i, line, last = [], text.find(old), 1, 0
    while i != -1:
        line += text.count("\n", last, i)
        spans.append(Span(i, i + len(old), new, line, line + old.count("\n", 0, max(len(old) - 1, 1))))
        last, i = i, text.find(old, i + len(old))
    return tuple(spans)


def strip_gutters(old: str) -> str | None:
    """old_string without Read's gutters when every line has one, numbered consecutively; else None."""
    lines = old.split("\n")
    body = lines[:-1] if len(lines) > 1 and lines[-1] == "" else lines
    numbers, out = [], []
    for line in body:
        m = GUTTER.match(line) or _BARE_GUTTER.match(line)
        if m is None:
            return None
        numbers.append(int(m.group(1)))
        out.append(line[m.end():])
    if not any(GUTTER.match(line) for line in body) or numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        return None
    return "\n".join(out + lines[len(body):])


def _strip_new_gutters(new: str) -> str:
    """new_string's gutters removed: every tab gutter, and a bare number between numbered neighbours."""
    lines = new.split("\n")
    tabbed = [GUTTER.match(line) for line in lines]
    out = []
    for k, line in enumerate(lines):
        if tabbed[k]:
            out.append(line[tabbed[k].end():])
            continue
        bare = _BARE_GUTTER.match(line)
        neighbours = (tabbed[k - 1] if k else None, tabbed[k + 1] if k + 1 < len(lines) else None)
        near = [int(m.group(1)) for m in neighbours if m]
        out.append("" if bare and any(abs(n - int(bare.group(1))) == 1 for n in near) else line)
    return "\n".join(out)


def _core(old: str) -> tuple[list[str], int, int]:
    """old_string's lines without blank lines at either end, and how many were dropped at each end."""
    lines = old.split("\n")
    lo, hi = 0, len(lines)
    while lo < hi and not lines[lo].strip():
        lo += 1
    while hi > lo and not lines[hi - 1].strip():
        hi -= 1
    return lines[lo:hi], lo, len(lines) - hi


def _loose_windows(lines: list[str], old: str, budget: int = 2_000_000) -> list[tuple[int, int]]:
    """Non-overlapping [first, end) line windows whose words, in order, are old_string's words. A search that
    would compare more than `budget` lines (a long old_string in a file of near-copies of it) finds none."""
    want = old.split()
    if not want:
        return []
    words = [line.split() for line in lines]
    windows, i = [], 0
    while i < len(lines):
        if not words[i] or words[i][0] != want[0]:
            i += 1
            continue
        k, j = 0, i
        while k < len(want) and j < len(lines):
            if words[j]:
                if want[k:k + len(words[j])] != words[j]:
                    break
                k += len(words[j])
            j += 1
        budget -= j - i + 1
        if budget < 0:
            return []
        if k == len(want):
            windows.append((i, j))
            i = j
        else:
            i += 1
    return windows


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def _rebase(line: str, old_indent: str, file_indent: str) -> str:
    """`line` moved by the indentation difference between an old_string line and the file's line."""
    indent = _indent(line)
    if indent.startswith(old_indent):
        return file_indent + line[len(old_indent):]
    cut = len(old_indent) - len(indent)
    if old_indent.startswith(indent) and len(file_indent) >= cut:  # dedented relative to the old line
        return file_indent[:len(file_indent) - cut] + line.lstrip()
    return line


def _loose_spans(text: str, windows: list[tuple[int, int]], old: str, new: str) -> tuple[Span, ...]:
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    core, lead, trail = _core(old)
    new_lines = new.split("\n")
    while lead and new_lines and not new_lines[0].strip():  # old's blank edges matched nothing; drop new's too
        new_lines, lead = new_lines[1:], lead - 1
    while trail and new_lines and not new_lines[-1].strip():
        new_lines, trail = new_lines[:-1], trail - 1
    spans = []
    for a, b in windows:
        window = lines[a:b]
        if [w.split() for w in window if w.strip()] == [c.split() for c in core if c.strip()]:
            out = _by_lines(window, core, new_lines)
        elif sum(bool(n.strip()) for n in new_lines) <= sum(bool(c.strip()) for c in core):
            out = _by_words(window, new_lines)  # old (and new) written on fewer lines than the file has
        else:
            first = next(c for c in core if c.strip())
            out = [_rebase(n, _indent(first), _indent(window[0])) if n.strip() else n for n in new_lines]
        start, end = offsets[a], offsets[b] - 1
        if not any(line.strip() for line in out):  # a deletion takes the lines with it, as an exact one would
            out = []
            start, end = (start, end + 1) if b < len(lines) else (max(start - 1, 0), end)
        spans.append(Span(start, end, "\n".join(out), a + 1, b))
    return tuple(spans)


def _by_lines(window: list[str], core: list[str], new_lines: list[str]) -> list[str]:
    """new_lines with old_string's unchanged lines taken verbatim from the file and the rest re-indented by
    the indentation difference of the old line they replace (an inserted line: of the line after it)."""
    file_of = [k for k, w in enumerate(window) if w.strip()]  # the window line of each non-blank core line
    pairs, n = {}, 0  # core index -> (old indent, file indent)
    for k, c in enumerate(core):
        if c.strip():
            pairs[k], n = (_indent(c), _indent(window[file_of[n]])), n + 1
    nonblank = sorted(pairs)
    file_line = {k: file_of[i] for i, k in enumerate(nonblank)}

    def pair(k: int) -> tuple[str, str]:  # the nearest non-blank core line at or after k, else before it
        after = [p for p in nonblank if p >= k]
        return pairs[after[0] if after else nonblank[-1]]

    out, last = [], None  # last: the core line the previous output line stood for
    matcher = difflib.SequenceMatcher(None, [" ".join(c.split()) for c in core],
                                      [" ".join(n.split()) for n in new_lines], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for t in range(j2 - j1):
            line = new_lines[j1 + t]
            k = i1 + t if tag in ("equal", "replace") and i1 + t < i2 else None
            if k in file_line and last == k - 1 and last in file_line:  # blank file lines old_string left out
                out.extend(window[file_line[last] + 1:file_line[k]])
            if tag == "equal" and k in file_line:
                out.append(window[file_line[k]])
            elif line.strip():
                out.append(_rebase(line, *pair(k if k is not None else i2 - 1 if tag == "replace" else i1)))
            else:
                out.append(line)
            last = k
    return out


def _by_words(window: list[str], new_lines: list[str]) -> list[str]:
    """new_string's words laid out on the window's lines: a word kept or replaced stays on its line, and words
    added between two lines go on a line of their own with the next line's indentation."""
    owner, words = [], []
    for k, line in enumerate(window):
        for w in line.split():
            owner.append(k)
            words.append(w)
    new_words = " ".join(new_lines).split()
    on_line: dict[int, list[str]] = {}
    before: dict[int, list[str]] = {}  # words inserted just before window line k (len(window): after the last)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, words, new_words, autojunk=False).get_opcodes():
        if tag in ("equal", "replace"):
            for t in range(j2 - j1):  # spread replacements over the replaced words' lines
                k = owner[i1 + min(t * (i2 - i1) // (j2 - j1), i2 - i1 - 1)]
                on_line.setdefault(k, []).append(new_words[j1 + t])
        elif tag == "insert":
            if 0 < i1 < len(words) and owner[i1 - 1] == owner[i1]:
                on_line.setdefault(owner[i1 - 1], []).extend(new_words[j1:j2])
            else:
                before.setdefault(owner[i1] if i1 < len(words) else len(window), []).extend(new_words[j1:j2])
    out = []
    for k, line in enumerate(window + [""]):
        if k in before:
            indent = _indent(line) if k < len(window) else _indent(window[owner[-1]])
            out.append(indent + " ".join(before[k]))
        if k == len(window):
            break
        if not line.strip():
            out.append(line)
        elif on_line.get(k) == line.split():
            out.append(line)
        elif on_line.get(k):
            out.append(_indent(line) + " ".join(on_line[k]))
    return out


def _not_found(text: str, old: str, stripped: bool) -> str:
    """Name the closest window of lines, its line numbers and the likely cause."""
    message = "old_string was not found in the file"
    message += ", even without Read's line-number prefixes." if stripped else "."
    old_lines = old.strip("\n").split("\n")
    lines = text.split("\n")
    size = min(len(old_lines), len(lines))
    best, best_at = 0.0, 0
    for i in _candidate_windows(lines, old_lines, size):
        # Mean similarity of aligned lines: a character-level diff of whole blocks is quadratic and takes
        # seconds on a few hundred lines.
        ratio = sum(_similarity(lines[i + k], old_lines[k]) for k in range(size)) / size
        if ratio > best:
            best, best_at = ratio, i
    if best < 0.5:
        return message + " No similar text either; Read the file to see its current content."
    window = lines[best_at:best_at + size]
    where = f"line {best_at + 1}" if size == 1 else f"lines {best_at + 1}-{best_at + size}"
    message += (f" The closest text is at {where} ({best:.0%} similar):\n"
                f"{numbered(window[:15], best_at + 1)}\n")
    if size > 15:
        message += f"[... {size - 15} more lines]\n"
    return message + "Copy the text exactly as the file has it (without Read's line-number prefix)."


def _candidate_windows(lines: list[str], old_lines: list[str], size: int, keep: int = 20) -> list[int]:
    """Window starts worth comparing line by line: all of them in a small file, else those sharing the
    most words with old_string."""
    starts = range(len(lines) - size + 1)
    if len(starts) * size <= 5000:
        return list(starts)
    words = set(_WORD.findall("\n".join(old_lines)))
    per_line = [sum(w in words for w in _WORD.findall(line)) for line in lines]
    score = sum(per_line[:size])
    scores = [score]
    for i in range(1, len(starts)):  # sliding window sum
        score += per_line[i + size - 1] - per_line[i - 1]
        scores.append(score)
    return sorted(starts, key=lambda i: -scores[i])[:keep]


def _similarity(a: str, b: str) -> float:
    if a == b:
        return 1.0
    return difflib.SequenceMatcher(None, a[:300], b[:300], autojunk=False).ratio()
