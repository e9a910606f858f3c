"""Long files in the pipeline: the numbered region around a request's hits (what the model is shown) and the
window of lines it rewrites whole (spliced back into the file)."""
from __future__ import annotations


def region(text: str, lines: list[int], context: int) -> str:
    """Numbered lines around `lines` (1-based), as Read shows them; the file's start when there are none."""
    rows = text.splitlines()
    keep: set[int] = set()
    for n in lines or [1]:
        keep.update(range(max(1, n - context), min(len(rows), n + context) + 1))
    out, last = [], 0
    for n in sorted(keep):
        if last and n != last + 1:
            out.append("...")
        out.append(f"{n:>6}\t{rows[n - 1]}")
        last = n
    return "\n".join(out)


WINDOW_CONTEXT = 15  # lines kept around a long file's hits when only a window of it is rewritten
WINDOW_MAX = 80


def window(text: str, hits: list[int]) -> tuple[int, int] | None:
    """Lines (first, last) around the first cluster of hits; None without hits (then one Edit call)."""
    if not hits:
        return None
    total = text.count("\n") + (0 if text.endswith("\n") else 1)
    first = max(1, hits[0] - WINDOW_CONTEXT)
    last = hits[0]
    for h in hits[1:]:
        if h - first > WINDOW_MAX - 2 * WINDOW_CONTEXT:
            break
        last = h
    return first, min(total, last + WINDOW_CONTEXT)


def lines(text: str | None, window: tuple[int, int]) -> str:
    rows = (text or "").splitlines(keepends=True)
    return "".join(rows[window[0] - 1:window[1]])


def splice(text: str | None, window: tuple[int, int], new: str) -> str:
    """`text` with lines window[0]..window[1] replaced by `new`."""
    rows = (text or "").splitlines(keepends=True)
    old = "".join(rows[window[0] - 1:window[1]])
    new = new.rstrip("\n") + old[len(old.rstrip("\n")):]  # a fenced block loses the window's trailing blank lines
    return "".join(rows[:window[0] - 1]) + new + "".join(rows[window[1]:])
