"""Commands a request quotes that run the project's own code (`python -m shop.report apple:0.5`, `python app.py
--limit 3`): the file they run is one the request names, and the command itself is the most direct check (it
crashes now; it must not after the fix). Without this, "Running `python -m shop.report apple:0.5` crashes" sent the
1.5B to README.md, where the quoted text occurs (docs/EVALS.md, stop 38)."""
from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

QUOTED_COMMAND = re.compile(r"`((?:python3?|pytest)\s[^`\n]+)`")
SHELL_SYNTAX = re.compile(r"[|;&<>$()]")  # a pipeline or redirection is more than one program: not run as a check
RUN_MODULE = re.compile(r"\bpython3?\s+-m\s+([A-Za-z_][\w.]*)")
RUNNERS = ("pytest", "unittest")
UNITTEST_ARGS = re.compile(r"\bpython3?\s+-m\s+unittest((?:\s+(?:--?[\w-]+\s+)*[A-Za-z_][\w.]*)+)")
UNITTEST_VALUED = ("-k", "-p", "-s", "-t")  # options whose next word is their value, not a test module


def module_file(root: Path, module: str) -> Path | None:
    """The project file `python -m module` runs, if the project has it."""
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__main__.py"):
        if path.is_file():
            return path.resolve()
    return None


def run_files(root: Path, request: str) -> list[Path]:
    """The project modules the request runs with `python -m` (a module name is not a path: localize misses it), and
    the test modules `python -m unittest test_stats` names (`test_stats.T.test_empty`: its longest module part)."""
    out = [p for m in RUN_MODULE.finditer(request) if (p := module_file(root, m.group(1))) is not None]
    for m in UNITTEST_ARGS.finditer(request):
        words = m.group(1).split()
        for i, name in enumerate(words):
            if name.startswith("-") or (i and words[i - 1] in UNITTEST_VALUED):
                continue
            parts = name.split(".")
            found = next((p for n in range(len(parts), 0, -1) if (p := module_file(root, ".".join(parts[:n])))), None)
            if found is None:
                break  # the prose after the command
            if found not in out:
                out.append(found)
    return out


def quoted_commands(root: Path, request: str) -> list[str]:
    """Backquoted commands in the request that run a project file or module, or its tests."""
    out = []
    for m in QUOTED_COMMAND.finditer(request):
        command = m.group(1).strip()
        if SHELL_SYNTAX.search(command):
            continue
        try:
            words = shlex.split(command)
        except ValueError:
            continue
        if _runs_project(root, words) and command not in out:
            out.append(command)
    return out


# An unquoted `python -m shop.report apple:1:2 --discount 0.5 prints total 1.00`: the command ends at the first
# plain word that says what it does, or at the end of the sentence.
UNQUOTED = re.compile(r"\bpython3?\s+(?:-m\s+[A-Za-z_][\w.]*|[\w./-]+\.py)(?:\s+(?!(?:prints?|printing|should|gives?|"
                      r"returns?|outputs?|shows?|says|and|but|to|crash\w*|fails?|with|then|so|which|that|it|instead|"
                      r"now|when|if|as|must|does|is|work\w*|runs?|pass\w*|still|again|exits?|raises?)\b)[^\s`'\"]+)*")


def written_commands(root: Path, request: str) -> list[str]:
    """quoted_commands, else the commands written unquoted in the request that run the project's code (a test
    runner written so is left to the test checks, which count the tests each candidate passes)."""
    if quoted := quoted_commands(root, request):
        return quoted
    out = []
    for m in UNQUOTED.finditer(request):
        verb_next = m.group(0)[-1] not in ".,;:!?" and re.match(r"\s+\w", request[m.end():]) is not None
        words = _arguments(m.group(0).rstrip(".,;:!?").split(), verb_next)
        command = " ".join(words)
        runner = words[0] == "pytest" or (len(words) > 2 and words[1] == "-m" and words[2] in RUNNERS)
        if not runner and not SHELL_SYNTAX.search(command) and _runs_project(root, words) and command not in out:
            out.append(command)
    return out


def _arguments(words: list[str], verb_next: bool = False) -> list[str]:
    """The program and its arguments up to the first word of prose ("python fetch.py I get KeyError"): a plain word
    is an argument only as an option's value (`--name Bob`), or as the last word when a verb follows (`python
    find.py Dentist says ...`: verb_next); flags, numbers, paths and a:b pairs are arguments."""
    start = 3 if words[1:2] == ["-m"] else 2
    plain = [i for i in range(start, len(words)) if words[i].isalpha() and not words[i - 1].startswith("-")]
    if verb_next and plain == [len(words) - 1]:
        return words
    return words[:plain[0]] if plain else words


def asked_command(request: str) -> str | None:
    """The one backquoted command a question asks about ("What does `git log -3 --oneline` show?"), when its first
    word is a program on PATH: run as written, not re-typed by the model (which once added a word of the sentence)."""
    spans = [m.group(1).strip() for m in re.finditer(r"`([^`\n]+)`", request)]
    commands = []
    for span in spans:
        try:
            words = shlex.split(span)
        except ValueError:
            continue
        if words and len(words) + (" " in span) > 1 and shutil.which(words[0]):
            commands.append(span)
    return commands[0] if len(commands) == 1 else None


def _runs_project(root: Path, words: list[str]) -> bool:
    if words[0] == "pytest":
        return True
    if len(words) < 2:
        return False
    if words[1] == "-m":
        return len(words) > 2 and (words[2] in RUNNERS or module_file(root, words[2]) is not None)
    return words[1].endswith(".py") and (root / words[1]).is_file()
