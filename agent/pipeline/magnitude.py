"""A rough size the request gives for a wrong number a script prints: 'prints "Total: 388,147.48 EUR" for a trip that
cost about a thousand euros'. A change that leaves the number as far from that size is no fix, however the output
changed (bugfix-trip-currency: `total -= eur` printed "Total: -388,147.48 EUR" and passed as a change).
"""
from __future__ import annotations

import re

# 1,094.20 as one number; a plain -12.5 too
FIGURE = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")
WORDS = {"ten": 10, "dozen": 12, "twenty": 20, "fifty": 50, "hundred": 100, "thousand": 1_000, "million": 1_000_000}
# the size of a value ("cost about", "should be around"), not of an input ("for about 40 orders")
SIZE = re.compile(r"\b(?:costs?|is|are|was|were|be|weighs?|weighed|takes?|took|totals?|totalled|comes?\s+to|"
                  r"came\s+to|worth|measures?)\s+(?:about|around|roughly|approximately|nearly|almost|close\s+to)\s+"
                  r"(?:(a|an|one)\s+)?"
                  r"(\d[\d,]*(?:\.\d+)?|" + "|".join(WORDS) + r")(?:\s+(hundred|thousand|million)\b)?", re.IGNORECASE)
QUOTED = re.compile(r"([`'\"])([^`'\"\n]+)\1")
FACTOR = 2.0  # "about a thousand": 500 to 2,000; a wrong number is further off than that


def stated_size(request: str) -> float | None:
    """The amount after "about", "around", "roughly" ... in the request (None: it states none)."""
    m = SIZE.search(request)
    if m is None:
        return None
    word = m.group(2).lower()
    value = WORDS[word] if word in WORDS else float(word.replace(",", ""))
    if m.group(1) and word not in WORDS:
        return None  # "about a 5" is no amount
    return value * (WORDS[m.group(3).lower()] if m.group(3) else 1)


def figures(line: str) -> list[float]:
    return [float(f.replace(",", "")) for f in FIGURE.findall(line)]


def near(value: float, size: float) -> bool:
    return size > 0 and size / FACTOR <= value <= size * FACTOR


def still_far(request: str, wrong: str, output: str) -> tuple[str, str] | None:
    """(the label of the request's quoted wrong line, the output line that stands where it did, "" when none does)
    when that line's number is missing or still far from the size the request gives; None when it came near, or
    the request gives no size for a number it quotes (deleting the line is no fix either)."""
    size = stated_size(request)
    # 'prints the wrong total: "Total: 388,147.48 EUR"' quotes it a few words after "prints"
    wrong = wrong or next((q.group(2).strip() for q in QUOTED.finditer(request) if FIGURE.search(q.group(2))), "")
    if size is None or not wrong:
        return None
    numbers = figures(wrong)
    at = next((i for i, n in enumerate(numbers) if not near(n, size)), None)
    label = FIGURE.split(wrong)[0].strip()
    if at is None or not label:
        return None  # the quoted number is already near: the size is not what is wrong
    line = next((ln.strip() for ln in output.splitlines() if ln.strip().startswith(label)), "")
    now = figures(line)
    return None if len(now) == len(numbers) and near(now[at], size) else (label, line)
