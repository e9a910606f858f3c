"""The checks the harness runs after an edit: the tests or script the request names, or the project's
tests that import the changed module. A check is a shell command run through the Bash tool, so
permission rules, hooks and the approver decide whether it may run."""
from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
from pathlib import Path
from typing import Any

import pathspec

from agent.core import model_text as mt
from agent.pipeline.localize import Localization, project_files
from agent.pipeline.magnitude import QUOTED, still_far
from agent.pipeline.project_imports import imported_modules, is_test_file, related_tests
from agent.pipeline.quoted_runs import quoted_commands, written_commands

FAILURE = re.compile(r"\b(fail\w*|errors?|exceptions?|traceback|crash\w*|broken|wrong)\b|\w+Error\b", re.IGNORECASE)
RUNS = re.compile(r"\b(run(?:ning|s)?|prints?|outputs?|python3?)\b", re.IGNORECASE)


# "should print TOTAL 100 but prints 380", "returns 3 instead of 4", "prints 100.00, but an order of 100 should get
# the discount", 'says "no notes found", but': the request reports a wrong result (a dot inside a number does not
# end the sentence).
SENTENCE = r"(?:[^.]|\.(?=\S))*?"
WRONG = re.compile(r"\bbut\b" + SENTENCE + r"\b(?:prints?|returns?|gives|shows|outputs?|says|ends)\b|\binstead\b|"
                   r"\b(?:prints?|returns?|gives|shows|outputs?|says)\s+([`'\"])[^`'\"\n]+\1,?\s+but\b|"
                   r"\b(?:prints?|returns?|gives|shows|outputs?|says)\b" + SENTENCE + r"\bbut\b" + SENTENCE +
                   r"\bshould\b", re.IGNORECASE)
# "should end with the line TOTAL 100 units", "should print `OK`": what the script's output must show.
EXPECTS = re.compile(r"\bshould\s+(?:print|output|show|say|write|end\s+with|display)\s+(?:the\s+(?:line|text)\s+|"
                     r"exactly\s+)?[`'\"]?(.+?)[`'\"]?(?=\s*(?:[,;]|\bbut\b|\binstead\b|\.(?:\s|$)|$))", re.IGNORECASE)
# "should print the total of each region": what the output is about, not a line of it (a quote would be one).
DESCRIBED = re.compile(r"(?:the|a|an|each|every|all|its|their|how|what|which|one|some)\b", re.IGNORECASE)
PRINTS_NOW = re.compile(r"\b(?:prints?|outputs?|shows)\s+([`'\"])([^`'\"\n]+)\1", re.IGNORECASE)
EXIT_LINE = re.compile(r"^\[exit code -?\d+[^\]]*\]$")
TEST_RUNNER = re.compile(r"-m\s+(?:pytest|unittest)\b")


def reports_failure(request: str) -> bool:
    """The request says something fails: running its check first shows the model how."""
    return bool(FAILURE.search(request) or WRONG.search(request))


def expected_output(request: str) -> str:
    """The output line the request says a script should print ("" when it names none): after "should print", or
    the quoted line after "should" shaped like the quoted line it "prints" now ('prints "A-17 total 100.00", but
    ... should get the discount ("A-17 total 90.00")')."""
    m = EXPECTS.search(request)
    if m and (request[m.start(1) - 1] in "`'\"" or not DESCRIBED.match(request, m.start(1))):
        return m.group(1).strip()
    now = PRINTS_NOW.search(request)
    should = re.compile(r"\bshould\b", re.IGNORECASE).search(request, now.end()) if now else None
    for quoted in QUOTED.finditer(request, should.end()) if should else ():
        want, was = quoted.group(2).strip(), now.group(2).strip()
        if want != was and want.split()[:1] == was.split()[:1]:
            return want
    return ""


def kept_lines(request: str, before: str) -> tuple[str, ...]:
    """The lines of the failing run's output a fix must leave as they were: all but the one the request quotes as
    wrong, when it also quotes what that line should be (a candidate that flipped a comparison printed the wanted
    line and changed two others)."""
    now, want, lines = PRINTS_NOW.search(request), expected_output(request), output_lines(before)
    if now is None or not want or now.group(2).strip() not in lines:
        return ()
    return tuple(line for line in lines if line != now.group(2).strip())


def output_lines(output: str) -> list[str]:
    """A command's output lines, stripped, without blank lines and the Bash tool's exit-code line."""
    return [ln.strip() for ln in output.splitlines() if ln.strip() and not EXIT_LINE.match(ln.strip())]


def wrong_line(request: str) -> str:
    """The output line the request quotes as what a script prints now ("" when it quotes none)."""
    now = PRINTS_NOW.search(request)
    return now.group(2).strip() if now else ""


def output_drifts(output: str, expected: str, kept: tuple[str, ...], wrong: str = "", strict: bool = False) -> bool:
    """Lines other than the wanted one changed from the failing run's output, other than the way the wanted one
    did (fixing "build: 2h 122m" also fixes "test: 1h 73m"; a flipped comparison moves totals both ways). strict:
    only the very words the wanted line replaced, replaced alike (a number moved the same way is no proof: `// 60`
    -> `// 3600` also took "lint: 1m" to "lint: 0m")."""
    now = [ln for ln in output_lines(output) if ln != expected]
    if not kept or now == list(kept):
        return False
    alike = (lambda a, b: bool(wrong) and _rewritten(wrong, expected) == _rewritten(a, b)) if strict else \
        (lambda a, b: _analogous(wrong, expected, a, b))
    return len(now) != len(kept) or not all(a == b or alike(a, b) for a, b in zip(kept, now))


TOKEN = re.compile(r"-?\d+(?:\.\d+)?|\w+|\S")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?$")


def _changes(before: str, after: str) -> list[tuple[str, str]] | None:
    """The (old, new) tokens of two lines of the same shape (None: another shape)."""
    a, b = TOKEN.findall(before), TOKEN.findall(after)
    if len(a) != len(b) or any(bool(NUMBER.match(x)) != bool(NUMBER.match(y)) for x, y in zip(a, b)):
        return None
    return [(x, y) for x, y in zip(a, b) if x != y]


def _rewritten(before: str, after: str) -> tuple[list[str], list[str]]:
    """The tokens between two lines' common start and end: "Fri 18:00 open (0 min left)" -> "Fri 18:00 closed"
    rewrote `open ( 0 min left )` as `closed`."""
    a, b = TOKEN.findall(before), TOKEN.findall(after)
    start, end, most = 0, 0, min(len(a), len(b))
    while start < most and a[start] == b[start]:
        start += 1
    while end < most - start and a[-1 - end] == b[-1 - end]:
        end += 1
    return a[start:len(a) - end], b[start:len(b) - end]


def _direction(old: str, new: str) -> str:
    """A number's change as "+" or "-"; another token's as the pair itself."""
    if NUMBER.match(old) and NUMBER.match(new):
        return "+" if float(new) > float(old) else "-"
    return f"{old}\0{new}"


def _analogous(wrong: str, expected: str, before: str, after: str) -> bool:
    """Line `before` became `after` the way the request's wrong line should become the expected one: the same
    tokens replaced alike, numbers moved the same way."""
    wanted, seen = _changes(wrong, expected) if wrong else None, _changes(before, after)
    if wrong and (wanted is None or seen is None):  # another shape: the same words rewritten as the same words
        return _rewritten(wrong, expected) == _rewritten(before, after)
    if not wanted or not seen:
        return False
    allowed = {_direction(x, y) for x, y in wanted}
    return all(_direction(x, y) in allowed for x, y in seen)


def output_misses(command: str, output: str, expected: str) -> bool:
    """A script's check ran cleanly but its output lacks the line the request expects."""
    if not expected or TEST_RUNNER.search(command):
        return False
    lines = [ln.strip() for ln in output.splitlines()]
    return not any(ln == expected or (len(expected) >= 4 and expected in ln) for ln in lines)


# A crash "fixed" by printing a complaint and exiting cleanly (the 1.5B's answer to "`python -m shop.report
# apple:0.5` crashes; make the quantity default to 1": "Error: Invalid argument format.").
ERROR_WORDS = re.compile(r"\b(?:error|invalid|usage|exception|cannot|can't|unable|failed)\b", re.IGNORECASE)
ASKS_MESSAGE = re.compile(r"\b(?:print|show|report|raise|give|display|exit|warn|complain)\w*\b[^.]{0,40}?"
                          r"\b(?:errors?|messages?|usage|warnings?)\b", re.IGNORECASE)


def swallowed_crash(command: str, output: str, failing: str, request: str) -> bool:
    """The command failed before the edit and now exits cleanly with an error line instead, which the request
    does not ask for."""
    if not failing or command != failing or TEST_RUNNER.search(command) or ASKS_MESSAGE.search(request):
        return False
    return any(ERROR_WORDS.search(ln) for ln in output_lines(output))


# "it lists them Z to A; it should list them A to Z": the output is said to be wrong, though no line of it is given.
STATED_WRONG = re.compile(r"\b(?:should|instead|wrong)\b", re.IGNORECASE)


def stated_wrong(command: str, request: str) -> bool:
    """The request says what a script (not a test run) prints is wrong, even when it runs cleanly."""
    return bool(STATED_WRONG.search(request)) and not TEST_RUNNER.search(command)


def not_fixed(command: str, output: str, failing: str, before: str, request: str) -> str:
    """Why a clean run of the check the request reported is no fix, "" when it may be one: an error line instead
    of the crash, the very output the request says is wrong, or its wrong number still far from the size given."""
    if swallowed_crash(command, output, failing, request):
        return mt.error_instead()
    if failing and command == failing and before and stated_wrong(command, request) and \
            output_lines(output) == output_lines(before):
        return mt.output_unchanged()
    if failing and command == failing and (far := still_far(request, wrong_line(request), output)):
        return mt.still_far(*far)
    return ""


def test_command(root: Path, tests: list[Path]) -> str:
    rel = " ".join(p.relative_to(root).as_posix() for p in tests)
    if importlib.util.find_spec("pytest") is not None:  # whichever runner this Python has
        return f"python -m pytest -q -x {rel}"
    return "python -m unittest " + " ".join(p.relative_to(root).with_suffix("").as_posix().replace("/", ".")
                                             for p in tests)


def check_commands(root: Path, request: str, loc: Localization, targets: list[Path]) -> list[str]:
    """Commands whose success means the change works, most specific first ([] when nothing applies)."""
    root = Path(root).resolve()
    named_tests = [p for p in loc.named if is_test_file(p)]
    tests = named_tests or ([] if not re.search(r"\btests?\b", request, re.IGNORECASE)
                            else related_tests(root, targets))
    if not tests and any(t.suffix == ".py" for t in targets):
        tests = related_tests(root, targets)
    # A script no test imports: the tests of the modules it imports, last ("python find.py Dentist finds nothing"
    # while test_search.py fails on the query's case: without them no check failed, and a no-op passed)
    used = [] if tests else related_tests(root, imported_modules(root, [t for t in targets if t.suffix == ".py"]))
    quoted = quoted_commands(root, request)  # what the user ran: the most direct check
    written = [] if quoted else written_commands(root, request)  # unquoted: after the tests, as a named script
    commands = quoted + ([test_command(root, tests)] if tests else []) + written + \
        ([test_command(root, used)] if used else [])
    scripts = [p for p in loc.named if p.suffix == ".py" and not is_test_file(p) and p not in targets]
    if RUNS.search(request):
        scripts += [p for p in loc.named if p.suffix == ".py" and not is_test_file(p) and p in targets
                    and re.search(r"python3?\s+" + re.escape(p.name), request)]
        commands += [f"python {p.relative_to(root).as_posix()}" for p in scripts if _is_script(p)
                     and not any(p.name in c for c in quoted + written)]
    return list(dict.fromkeys(commands))


REMOVES = re.compile(r"\b(remove|delete|drop|rename|replace|rewrite|merge|move)\b", re.IGNORECASE)


def lost_definitions(request: str, path: Path, before: str | None, after: str) -> list[str]:
    """Top-level functions, classes and assignments of a Python file that a rewrite dropped, and its
    `if __name__ == "__main__":` block; [] when the request asks to remove or replace something. A rename spares
    only the names the request mentions (a rewrite that renamed a parameter once dropped a script's main block)."""
    verbs = {m.lower() for m in REMOVES.findall(request)}
    if before is None or path.suffix != ".py" or verbs - {"rename"}:
        return []
    names_before, names_after = top_level_names(before), top_level_names(after)
    if names_before is None or names_after is None:
        return []
    spared = set(re.findall(r"\w+", request)) if verbs else set()
    lost = [n for n in names_before if n not in names_after and n not in spared]
    return lost + [MAIN_BLOCK] * (_has_main_block(before) and not _has_main_block(after))


# "from the GREETING_NAME environment variable", "the environment variable `API_URL`", "$PORT"
ENV_NAMED = re.compile(r"\b([A-Z][A-Z0-9_]{2,})[`'\"]?\s+(?:environment|env)\s+var(?:iable)?\b|"
                       r"\b(?:environment|env)\s+var(?:iable)?\s+[`'\"]?\$?([A-Z][A-Z0-9_]{2,})\b|\$([A-Z][A-Z0-9_]{2,})\b")


def unread_variables(request: str, path: Path, before: str | None, after: str) -> list[str]:
    """Environment variables the request names that a Python file's new text never reads by name (a rewrite once
    defined `GREETING_NAME = "world"` for "take the name from the GREETING_NAME environment variable"). Only for
    the one Python file the request names: where several change, another may be the one that reads it."""
    if path.suffix != ".py" or [Path(n).name for n in re.findall(r"[\w./-]+\.py\b", request)] != [path.name]:
        return []
    names = dict.fromkeys(n for m in ENV_NAMED.finditer(request) for n in m.groups() if n)
    return [n for n in names if _string_in(after, n) is False and not _string_in(before or "", n)]


def _string_in(source: str, text: str) -> bool | None:
    """A string literal equal to `text` occurs in the code (None: it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    return any(isinstance(n, ast.Constant) and n.value == text for n in ast.walk(tree))


def rewrite_problem(request: str, path: Path, name: str, before: str | None, after: str) -> str:
    """Why a rewrite of file `name` does not do what the request asks ("" when nothing shows it)."""
    if lost := lost_definitions(request, path, before, after):
        return f"it dropped {', '.join(lost)}, which {name} defined; keep them"
    if unread := unread_variables(request, path, before, after):
        return f"it never reads the {unread[0]} environment variable; read it with os.environ.get(\"{unread[0]}\")"
    if own := ignored_own_files(path, after):
        return f"it ignores the project's own files ({', '.join(own[:4])}); list only what builds and tools generate"
    if adds_no_test(request, path, before, after):
        return "it adds no test function; write a new `def test_...():` that calls the code and asserts its result"
    if doubled := doubled_lines(before, after):
        return f"it wrote lines {doubled} twice in a row; write each line once"
    return ""


def written(call: Any, whole: bool, target: Path) -> str:
    """What an applied change (a PendingCall) left: the rewrite's content, or the file after an Edit."""
    return call.args.get("content", "") if whole else target.read_text(encoding="utf-8", errors="replace")


DOUBLED_MAX_LINES = 30  # the longest run of lines looked for twice in a row
DOUBLED_MIN_CHARS = 20  # shorter runs (closing brackets) repeat in real files


def doubled_lines(before: str | None, after: str) -> str:
    """'6-7' when `after` holds a run of two or more lines written twice in a row (those are the copy) that `before`
    did not: an Edit whose new_string repeated the lines after its old_string once passed as a change."""
    rows = [r.rstrip() for r in after.splitlines()]
    old = "\n".join(r.rstrip() for r in (before or "").splitlines())
    for k in range(2, DOUBLED_MAX_LINES + 1):
        for i in range(len(rows) - 2 * k + 1):
            block = rows[i:i + k]
            if rows[i + k:i + 2 * k] != block or sum(bool(r.strip()) for r in block) < 2 or \
                    sum(len(r.strip()) for r in block) < DOUBLED_MIN_CHARS:
                continue
            if "\n".join(block * 2) not in old:
                return f"{i + k + 1}-{i + 2 * k}"
    return ""


# "add a test for Cart.remove", "write unit tests for slugify": the test file must gain a test
ADDS_TEST = re.compile(r"\b(?:add|write|create)\w*\b[^.\n]{0,40}?\b(?:unit\s+)?tests?\b(?!\s*(?:file|suite|folder))",
                       re.IGNORECASE)


def adds_no_test(request: str, path: Path, before: str | None, after: str) -> bool:
    """A rewrite of a test file, for a request that adds a test, with no more test functions than before (the 1.5B
    once "added a test" that was a copy of the method under test, which pytest passes by not collecting it)."""
    if not is_test_file(path) or not ADDS_TEST.search(request):
        return False
    now = _test_count(after)
    return now is not None and now <= (_test_count(before or "") or 0)


def _test_count(text: str) -> int | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    tests = lambda body: sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and  # noqa: E731
                             n.name.startswith("test") for n in body)
    return tests(tree.body) + sum(tests(n.body) for n in tree.body if isinstance(n, ast.ClassDef))  # as collected


SOURCE_SUFFIXES = frozenset(".py .pyi .js .jsx .ts .tsx .go .rs .java .kt .c .h .cc .cpp .hpp .rb .php .cs .swift "
                            ".md .toml .cfg .ini .sh".split())


def ignored_own_files(path: Path, after: str) -> list[str]:
    """The project's files a rewritten .gitignore would ignore: those git tracks (in a repository), else its source
    files. The 1.5B asked for a .gitignore listed every file of the project in it."""
    if path.name != ".gitignore":
        return []
    spec = pathspec.GitIgnoreSpec.from_lines(after.splitlines())
    root = path.parent
    try:
        done = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, timeout=10)
        tracked = [n for n in done.stdout.decode("utf-8", "replace").split("\0") if n] if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        tracked = None
    if tracked is None:
        tracked = [p.relative_to(root).as_posix() for p in project_files(root) if p.suffix in SOURCE_SUFFIXES]
    return [n for n in tracked if n != ".gitignore" and spec.match_file(n)]


MAIN_BLOCK = 'the `if __name__ == "__main__":` block'


def _has_main_block(source: str) -> bool:
    return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in ast.parse(source).body)


def top_level_names(source: str) -> list[str] | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names


def _is_script(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return "__main__" in text or not re.search(r"^\s*def\s", text, re.MULTILINE)


def first_line(text: str) -> str:
    """The line of a check's output that says what went wrong (pytest's FAILED/Error lines first)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip() and not ln.startswith("[exit code")]
    ranked = [[ln for ln in lines if ln.startswith("E ")], [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))],
              [ln for ln in lines if "Error" in ln], lines]  # a traceback's source lines may say "Error" too
    return next((group[0] for group in ranked if group), "")[:160]
