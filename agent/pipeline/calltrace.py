"""Run a failing Python check and print the calls into the project's own functions: arguments and results.

    python calltrace.py ROOT -- python -m pytest -q -x test_orders.py
    python calltrace.py ROOT -- python report.py

A small model told "935 != 1025" rarely finds the line that makes it; told `parse_price(text='4.5') -> 405` it sees
which function is wrong and how. The check runs in this process (runpy) under sys.settrace, which follows only
frames of files under ROOT that are not tests (test_*.py, *_test.py, conftest.py) or installed packages; each call
is printed once, indented by depth, with its arguments as they were on entry and its result (or the exception it
raised). Run with the project's own Python (its source passed with -c), so it imports nothing of the agent.
"""
from __future__ import annotations

import os
import reprlib
import runpy
import shlex
import sys

MAX_LINES = 40
MAX_DEPTH = 3
_repr = reprlib.Repr()
_repr.maxstring, _repr.maxother, _repr.maxlist, _repr.maxdict, _repr.maxset, _repr.maxtuple = 48, 48, 8, 8, 8, 8
_repr.maxlevel = 3


class Tracer:
    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root) + os.sep
        self.slots: list[str | None] = []
        self.seen: set[str] = set()
        self.depth = 0
        self.mine: dict[str, bool] = {}

    def ours(self, filename: str) -> bool:
        known = self.mine.get(filename)
        if known is None:
            path = os.path.realpath(filename)
            name = os.path.basename(path)
            known = not filename.startswith("<") and os.path.isfile(path) and path.startswith(self.root) and not (
                name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
                or f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}.venv{os.sep}" in path)
            self.mine[filename] = known
        return known

    def __call__(self, frame, event, arg):
        if event != "call" or not self.ours(frame.f_code.co_filename) or frame.f_code.co_name.startswith("<"):
            return None
        call = self.describe(frame)
        depth, slot = self.depth, len(self.slots)
        self.slots.append(None)  # filled on return: a call is listed before the calls it makes
        self.depth += 1
        raised: list = []

        def local(frame, event, arg):
            if event == "exception":
                raised[:] = [arg[1]]
            elif event == "line":
                raised.clear()  # caught inside: not what the call raised
            elif event == "return":
                self.depth -= 1
                result = f"raised {type(raised[0]).__name__}: {raised[0]}" if raised else _repr.repr(arg)
                self.fill(slot, depth, f"{call} -> {result}")
            return local
        return local

    def describe(self, frame) -> str:
        code = frame.f_code
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        args = []
        for name in names:
            value = frame.f_locals.get(name)
            if name in ("self", "cls") and name == names[0]:
                continue
            args.append(f"{name}={_repr.repr(value)}")
        owner = frame.f_locals.get("self")
        where = type(owner).__name__ + "." if owner is not None and "self" in names[:1] else ""
        module = os.path.splitext(os.path.basename(code.co_filename))[0]
        return f"{module}.{where}{code.co_name}({', '.join(args)})"

    def fill(self, slot: int, depth: int, line: str) -> None:
        if depth < MAX_DEPTH and line not in self.seen:
            self.seen.add(line)
            self.slots[slot] = "  " * depth + line

    @property
    def lines(self) -> list[str]:
        return [line for line in self.slots if line is not None]


def traced(command: str, root: str) -> str | None:
    """The shell command that runs `command` (a check such as `python -m pytest -q -x test_x.py` or `python
    report.py`) under this tracer with the same Python; None for checks of other kinds (pipes, other programs)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or not os.path.basename(words[0]).startswith("python") or len(words) < 2 or \
            any(w in ("|", "&&", "||", ";", ">", "<") for w in words) or words[1].startswith("-") and words[1] != "-m":
        return None
    with open(__file__, encoding="utf-8") as f:  # as -c: the sandbox may not show where the agent is installed
        source = f.read()
    return shlex.join([words[0], "-c", source, root, "--", *words])


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[1] != "--":
        print("usage: calltrace.py ROOT -- python (-m MODULE | SCRIPT) [ARGS...]", file=sys.stderr)
        return 2
    root, command = argv[0], argv[2:]
    rest = command[1:]
    sys.path.insert(0, os.getcwd())
    tracer = Tracer(root)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr = open(os.devnull, "w")  # the check's own output was shown already
    code = 0
    sys.settrace(tracer)
    try:
        if rest[:1] == ["-m"] and len(rest) >= 2:
            sys.argv = [rest[1], *rest[2:]]
            runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(rest)
            runpy.run_path(rest[0], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - the check failing is what is being traced
        code = 1
    finally:
        sys.settrace(None)
        sys.stdout = real_stdout
    lines = tracer.lines
    for line in lines[:MAX_LINES]:
        print(line)
    if len(lines) > MAX_LINES:
        print(f"... {len(lines) - MAX_LINES} more calls")
    return 0 if lines else (code or 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
