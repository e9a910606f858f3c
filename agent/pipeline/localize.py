"""Localization by the harness, before the model decides anything: the files a request names, and where
the identifiers and quoted strings it mentions occur in the project."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from agent.pipeline.quoted_runs import RUN_MODULE, run_files
from tools._walk import walk_files

# Files without an extension that projects keep by name: dotfiles and a few conventional names (a bare ".py" is an
# extension, not a file, so dotfiles are listed).
NAMED_FILES = (r"\.(?:gitignore|dockerignore|gitattributes|editorconfig|env(?:\.[\w-]+)?|flake8|pylintrc|coveragerc|"
               r"prettierrc|eslintrc|npmrc|nvmrc|python-version|pre-commit-config\.ya?ml)|Dockerfile|Containerfile|"
               r"Makefile|Procfile|Justfile|Gemfile|Rakefile|Vagrantfile|LICENSE|CODEOWNERS")
PATH_TOKEN = re.compile(r"(?<![\w/.-])((?:\.{0,2}/)?(?:[\w.-]+/)*(?:[\w-]+\.[A-Za-z][A-Za-z0-9]{0,5}|"
                        rf"(?:{NAMED_FILES})(?![\w.-])))(?![\w/])")
QUOTED = re.compile(r"""'([^'\n]{2,80})'|"([^"\n]{2,80})"|`([^`\n]{2,80})`""")
IDENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\b")
AGENT_DIRS = {".agent", ".claude", ".agents", ".git"}
MAX_FILE_BYTES = 256 * 1024
MAX_FILES = 400


@dataclass
class Localization:
    named: list[Path] = field(default_factory=list)  # existing files the request names, in order
    missing: list[str] = field(default_factory=list)  # file names in the request that do not exist (to create?)
    terms: list[str] = field(default_factory=list)  # identifiers and quoted strings searched
    hits: dict[Path, list[int]] = field(default_factory=dict)  # file -> line numbers where a term occurs

    def ranked(self) -> list[Path]:
        """Files with hits, most distinct hit lines first (then path order)."""
        return sorted(self.hits, key=lambda p: (-len(self.hits[p]), str(p)))


MAX_RESULT_ROWS = 12


def result_rows(root: Path, loc: Localization) -> list[str]:
    """`path:line: text` for the hits, definitions first; Python lines name the function they are in."""
    rows: list[tuple[int, str]] = []
    for path in loc.ranked():
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        rel = path.relative_to(root).as_posix()
        for n in loc.hits[path]:
            text = lines[n - 1].strip()
            where = _enclosing_def(lines, n) if path.suffix == ".py" else ""
            defines = re.match(r"(async\s+)?(def|class)\s", text) is not None
            rows.append((0 if defines else 1, f"{rel}:{n}:{where} {text[:160]}"))
    return [r for _, r in sorted(rows, key=lambda r: r[0])][:MAX_RESULT_ROWS]


def _enclosing_def(lines: list[str], n: int) -> str:
    indent = len(lines[n - 1]) - len(lines[n - 1].lstrip())
    for i in range(n - 2, -1, -1):
        m = re.match(r"(\s*)(?:async\s+)?def\s+(\w+)", lines[i])
        if m and len(m.group(1)) < indent:
            return f" (in {m.group(2)})"
    return ""


def project_files(root: Path) -> list[Path]:
    out = []
    for path in walk_files(root, root, max_depth=6):
        if path.relative_to(root).parts[0] in AGENT_DIRS:
            continue
        out.append(path)
        if len(out) >= MAX_FILES:
            break
    return out


# A plain word the request calls code: "the method subtotal", "rename total to grand_total"
NAMED_CODE = re.compile(r"\b(?:method|function|class|variable|constant|parameter|argument|attribute|field|property)"
                        r"\s+`?([A-Za-z_]\w*)|\brename\s+`?([A-Za-z_]\w*)`?\s+to\b", re.IGNORECASE)
NOT_NAMES = frozenset("""body bodies stub stubs raises returns return that which what where from into with and the
that's is are was does do named called definition definitions name names signature call calls in of to for""".split())


def _terms(request: str) -> list[str]:
    """Identifiers that look like code (snake_case, camelCase, CONSTANTS, calls) and quoted strings."""
    terms: list[str] = []
    for m in QUOTED.finditer(request):
        text = next(g for g in m.groups() if g)
        if not PATH_TOKEN.fullmatch(text.strip()):
            terms.append(text)
    in_paths = [m.span(1) for m in PATH_TOKEN.finditer(request)]
    named = {n for m in NAMED_CODE.finditer(request) for n in m.groups() if n and n.lower() not in NOT_NAMES}
    for m in IDENT.finditer(request):
        word = m.group(1)
        if any(a <= m.start() < b for a, b in in_paths):
            continue
        codeish = ("_" in word.strip("_") or (word[0].islower() and any(c.isupper() for c in word))
                   or (word.isupper() and len(word) > 2) or request[m.end():m.end() + 1] == "(" or word in named)
        if codeish and len(word) > 2 and not PATH_TOKEN.fullmatch(word):
            terms.append(word)
    seen, out = set(), []
    for t in terms:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


CODE_NAME = re.compile(r"[A-Za-z_]\w*\.[A-Za-z_]\w*")


def _code_reference(token: str, files: list[Path]) -> list[str]:
    """The two names of `Cart.total` when the project's Python code defines either (a method, not a file to make:
    "Make Cart.total raise ValueError" once created a file named Cart.total); [] otherwise."""
    if not CODE_NAME.fullmatch(token):
        return []
    names = token.split(".")
    defines = re.compile(r"^\s*(?:async\s+)?(?:class|def)\s+(%s)\b" % "|".join(names), re.MULTILINE)
    for f in files:
        if f.suffix == ".py":
            try:
                if f.stat().st_size <= MAX_FILE_BYTES and defines.search(f.read_text(encoding="utf-8")):
                    return names
            except (OSError, UnicodeDecodeError):
                continue
    return []


# Words of a question too common to say where anything is ("Which function in the project computes ...?")
COMMON = frozenset("""which where what there their these those about would could should function functions method
methods class classes project file files module modules code line lines value values does doing called calls using
used make makes something anything every other first second place defined define computes compute handle handles
handled return returns""".split())
WORD = re.compile(r"\b[A-Za-z]{5,}\b")


def word_hits(root: Path, request: str) -> list[Path]:
    """For a question that names no file and no identifier: the project files where its uncommon words occur,
    most distinct words first (the free loop, given none, answered "use shop/report.py" for the cart's discount)."""
    words = list(dict.fromkeys(w.lower() for w in WORD.findall(request) if w.lower() not in COMMON))
    if not words:
        return []
    pattern = re.compile(r"\b(%s)" % "|".join(map(re.escape, words)), re.IGNORECASE)
    scored = []
    for f in project_files(Path(root).resolve()):
        try:
            if f.stat().st_size > MAX_FILE_BYTES:
                continue
            found = {m.lower() for m in pattern.findall(f.read_text(encoding="utf-8"))}
        except (OSError, UnicodeDecodeError):
            continue
        if found:
            scored.append((-len(found), str(f), f))
    return [f for _, _, f in sorted(scored)]


def localize(root: Path, request: str) -> Localization:
    root = Path(root).resolve()
    loc = Localization()
    files = project_files(root)
    by_name: dict[str, list[Path]] = {}
    for f in files:
        by_name.setdefault(f.name, []).append(f)
    modules = {m.group(1) for m in RUN_MODULE.finditer(request)}  # `python -m shop.report`: a module, not a file
    references: list[str] = []
    for m in PATH_TOKEN.finditer(request):
        if m.group(1) in modules:
            continue
        token = m.group(1).strip("./") if m.group(1).startswith("./") else m.group(1)
        path = (root / token).resolve()
        candidates = [path] if path.is_file() else ([] if "/" in token else by_name.get(token, []))
        if len(candidates) == 1 and candidates[0] not in loc.named:
            loc.named.append(candidates[0])
        elif not candidates and (ref := _code_reference(token, files)):
            references += [n for n in ref if n not in references]
        elif not candidates and token not in loc.missing and (root / token).parent.is_dir():
            loc.missing.append(token)
    loc.named += [p for p in run_files(root, request) if p not in loc.named]
    terms = _terms(request)
    loc.terms = terms + [n for n in references if n not in terms]
    if loc.terms:
        for f in files:
            try:
                if f.stat().st_size > MAX_FILE_BYTES:
                    continue
                text = f.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            lines = [n for n, line in enumerate(text.splitlines(), start=1) if any(t in line for t in loc.terms)]
            if lines:
                loc.hits[f] = lines
    return loc
