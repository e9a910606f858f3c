"""The one-expression changes of a function's source (the mutation operators mutants.py checks): a whole number by one,
a comparison's bound, a slice dropped, + for -, / for // or *, min for max, and for or, a call's two arguments
exchanged, reverse=True, a statement that repeats an action deleted, brackets that undo a precedence slip, a // or %
bucket counted from 1, a cut that leaves room for what is appended, a heap entry's priority negated, a stdlib keyword
often missed (a csv writer told "\n" line ends, DictWriter extra keys ignored, textwrap a hanging indent; in an
f-string too), a copy appended in place of a list changed later, a split at the first separator only, a parameter
given the function's normalization; then a number the function uses elsewhere and a slip in a regular expression
(regex_mutations.py), and last a called name's mirror image (startswith for endswith), a condition negated or an
operand of and/or dropped, = for += and back, and another variable or attribute read in place of one. Only the
changed characters differ: the rest of the file keeps its spelling."""
from __future__ import annotations

import ast
import copy
from collections.abc import Iterator

from agent.pipeline import regex_mutations
from agent.pipeline.source_text import SourceText

MAX_SWAPS = 12  # a number the function uses elsewhere, tried per function
MAX_RENAMES = 12  # another of the function's variables read in place of one, per function, nearest uses first
COMPARE_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Lt: (ast.LtE, ast.Gt), ast.LtE: (ast.Lt, ast.GtE), ast.Gt: (ast.GtE, ast.Lt), ast.GtE: (ast.Gt, ast.LtE),
    ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,), ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,), ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,)}
BINARY_SWAPS: dict[type, tuple[type, ...]] = {ast.Add: (ast.Sub,), ast.Sub: (ast.Add,),
                                              ast.Div: (ast.FloorDiv, ast.Mult), ast.FloorDiv: (ast.Div,),
                                              ast.Mult: (ast.Div,)}
CALL_SWAPS = {"min": "max", "max": "min"}
LOOSE = (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr)  # bracketed when joined by `and`/`or`
# a function's mirror image called in its place (ManySStuBs4J's "wrong function name"), tried after the rest
MIRRORS = dict(pair for a, b in [("startswith", "endswith"), ("lstrip", "rstrip"), ("find", "rfind"),
                                 ("index", "rindex"), ("split", "rsplit"), ("lower", "upper"), ("islower", "isupper"),
                                 ("ljust", "rjust"), ("floor", "ceil"), ("keys", "values"), ("any", "all")]
               for pair in ((a, b), (b, a)))
HEAP_PUSHES = ("heappush", "heappushpop", "heapreplace")
# keywords a stdlib call is often missing: csv writes "\r\n" line ends and DictWriter refuses a row with keys beyond
# its fields unless told otherwise; textwrap indents the lines after the first only when told (INDENT: as wide as
# the text before the call on its line, or the first line's indent)
INDENT = object()
STDLIB_DEFAULTS = {("csv", "writer"): (("lineterminator", "\n"),),
                   ("csv", "DictWriter"): (("lineterminator", "\n"), ("extrasaction", "ignore")),
                   ("textwrap", "wrap"): (("subsequent_indent", INDENT),),
                   ("textwrap", "fill"): (("subsequent_indent", INDENT),)}
NORMALIZERS = ("lower", "casefold", "strip", "upper")  # a string method one side of a comparison may lack
OPERATORS: dict[type, str] = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
    ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.Add: "+", ast.Sub: "-", ast.Div: "/",
    ast.FloorDiv: "//", ast.Mult: "*"}
PRECEDENCE: dict[type, int] = {ast.Add: 1, ast.Sub: 1, ast.Mult: 2, ast.Div: 2, ast.FloorDiv: 2, ast.Mod: 2,
                               ast.MatMult: 2, ast.Pow: 3}




def function_mutants(source: str, qualnames: list[str]) -> list[tuple[int, str, str, str]]:
    """(line, before, after, the file with the change) for each one-expression change in the bodies of the named
    functions (Class.method or name), in the order the names are given, number swaps after every other change and
    another variable read in place of one last.
    Only the changed characters differ: the rest of the file keeps its spelling."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    src = SourceText(source)
    attributes: dict[str, set[str]] = {}  # the module's `base.attr` fields that are not called, by base name
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and id(n) not in called:
            attributes.setdefault(n.value.id, set()).add(n.attr)
    out, seen, later, last = [], {source}, [], []

    def add(target: ast.AST, text: str | None) -> None:
        if text is not None and (span := src.span(target)) is not None and \
                (content := source[:span[0]] + text + source[span[1]:]) not in seen:
            seen.add(content)
            out.append((target.lineno, source[span[0]:span[1]], text, content))
    for qualname in qualnames:
        func = _definition(tree, qualname)
        if func is None:
            continue
        strings = [n for n in ast.walk(func) if isinstance(n, ast.JoinedStr)]  # 3.11 places their parts loosely
        inner = {id(part) for s in strings for part in ast.walk(s) if part is not s}
        skip = inner | {id(s) for s in strings}
        skip |= {id(n.operand) for n in ast.walk(func) if isinstance(n, ast.UnaryOp) and  # -1 changes as one
                 isinstance(n.op, ast.USub) and _whole_number(n.operand) is not None}
        nodes = [n for stmt in func.body[_docstring(func):] for n in ast.walk(stmt) if id(n) not in skip]
        numbers = sorted({n.value for n in nodes if isinstance(n, ast.Constant) and type(n.value) is int and n.value > 1})
        changes = [c for node in nodes for c in [*_variants(src, node), *_regrouped(src, node), *_made_room(src, node)]]
        changes += _mirrored(func, nodes, {n.name for n in tree.body if isinstance(n, ast.FunctionDef)})
        changes += [c for s in strings if id(s) not in inner for c in _in_fstring(s)]
        # numbers swapped grow with their count squared: after every other change, a few a function
        later += [c for node in nodes for c in _other_constant(node, numbers)][:MAX_SWAPS]
        later += regex_mutations.pattern_changes(src, tree, nodes)
        last += [c for node in nodes for c in [*_mirror_called(src, node), *_loosened(src, node)]]
        last += _accumulated(src, func)
        last += _renamed(func, nodes, attributes)[:MAX_RENAMES]
        for target, text in changes:
            add(target, text)
        for stmt in _deletable(func):
            a, b = src.starts[stmt.lineno - 1], src.starts[stmt.end_lineno]
            if source[a:b].strip() == src.text(stmt).strip() and (content := source[:a] + source[b:]) not in seen:
                seen.add(content)
                out.append((stmt.lineno, src.text(stmt), "(the line deleted)", content))
    for target, text in later + last:
        add(target, text)
    return out


def _deletable(func: ast.AST) -> Iterator[ast.stmt]:
    """Statements that only act (a call whose value is dropped, `x += 1`) in a block that keeps another statement:
    one done once too often is a common bug (GenProg's deletion)."""
    for node in ast.walk(func):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list) or len(block) < 2 or node is func and field != "body":
                continue
            for stmt in block:
                if isinstance(stmt, ast.AugAssign) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
                    yield stmt


def _definition(tree: ast.Module, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    scope: list[ast.stmt] = tree.body
    node = None
    for part in [p for p in qualname.split(".") if p != "<locals>"]:
        node = next((n for n in scope if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == part), None)
        if node is None:
            return None
        scope = node.body
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _docstring(func: ast.AST) -> int:
    first = func.body[0] if func.body else None
    return int(isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and
               isinstance(first.value.value, str))


def _whole_number(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
            (n := _whole_number(node.operand)) is not None:
        return -n
    return None


def _variants(src: SourceText, node: ast.AST) -> Iterator[tuple[ast.AST, str | None]]:
    """(the node to replace, its new text) for each change made at this node."""
    if (n := _whole_number(node)) is not None:
        yield from ((node, repr(v)) for v in (n - 1, n + 1))
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        yield node, repr(not node.value)
    elif isinstance(node, ast.Compare):
        parts, old = [node.left, *node.comparators], [OPERATORS[type(op)] for op in node.ops]
        for i, op in enumerate(node.ops):
            for swap in COMPARE_SWAPS.get(type(op), ()):
                yield node, src.operators(node, parts, old, old[:i] + [OPERATORS[swap]] + old[i + 1:])
    elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in BINARY_SWAPS:
        parts = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.target, node.value]
        suffix = "" if isinstance(node, ast.BinOp) else "="
        for swap in BINARY_SWAPS[type(node.op)]:
            yield node, src.operators(node, parts, [OPERATORS[type(node.op)] + suffix], [OPERATORS[swap] + suffix])
    elif isinstance(node, ast.BoolOp):
        was, now = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        gaps = len(node.values) - 1
        yield node, src.operators(node, node.values, [was] * gaps, [now] * gaps)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield node, src.grouped(node.operand)
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        yield node, src.grouped(node.value)  # the slice dropped: rows[1:] -> rows
        lower, upper, step = node.slice.lower, node.slice.upper, node.slice.step
        if lower is not None and upper is not None and step is None:
            yield node, f"{src.grouped(node.value)}[:{src.text(upper)}]"
            yield node, f"{src.grouped(node.value)}[{src.text(lower)}:]"
        yield from _nudged(src, [b for b in (lower, upper) if b is not None])
    elif isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Tuple):
        yield from _nudged(src, [node.slice] if isinstance(node.slice, (ast.Name, ast.BinOp, ast.Call)) else [])
    elif isinstance(node, ast.Call):
        name = _called_name(node)
        if name in CALL_SWAPS and isinstance(node.func, ast.Name):
            yield node.func, CALL_SWAPS[name]
        if name == "range":
            yield from _nudged(src, node.args)
        if name in ("split", "rsplit") and len(node.args) <= 1 and not node.keywords and \
                (text := src.text(node)).endswith(")"):  # `k, v = s.split(":")` on "host:8080" unpacks three
            yield node, text[:-1].rstrip() + (", 1)" if node.args else "None, 1)")
        if name == "append" and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
            yield node.args[0], f"{node.args[0].id}.copy()"  # a list kept, then cleared or refilled: a copy kept
        if name in ("sorted", "sort") and not any(k.arg == "reverse" for k in node.keywords) and \
                (text := src.text(node)).endswith(")"):
            yield node, text[:-1].rstrip().rstrip(",") + (", " if node.args or node.keywords else "") + \
                "reverse=True)"
        if (text := src.text(node)).endswith(")"):  # the stdlib's defaults, missed
            for keyword, value in _missed_keywords(node, "  "):
                yield node, text[:-1].rstrip().rstrip(",") + f", {keyword}={_quoted(value)})"
        if name in HEAP_PUSHES and len(node.args) == 2:  # a min-heap used as a max-heap: its priority negated
            entry = node.args[1]
            first = entry.elts[0] if isinstance(entry, ast.Tuple) and entry.elts else entry
            if isinstance(first, ast.UnaryOp) and isinstance(first.op, ast.USub):
                yield first, src.text(first.operand)  # already negated: the minus dropped, never `-(-p)`
            elif not isinstance(first, ast.Starred):
                yield first, f"-{src.grouped(first)}"
        if len(node.args) == 2 and not any(isinstance(a, ast.Starred) for a in node.args) and \
                src.text(node.args[0]) != src.text(node.args[1]):
            yield node, src.exchanged(node, *node.args)  # f(a, b) -> f(b, a)


def _regrouped(src: SourceText, node: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """A precedence slip undone: `f - 32 * 5 / 9` -> `(f - 32) * 5 / 9`, `a * b + c` -> `a * (b + c)`; and a bucket
    counted from 1: `day // 7` -> `(day - 1) // 7`, `(day + 1) // 7` (the same for %)."""
    if not isinstance(node, ast.BinOp) or type(node.op) not in PRECEDENCE or (span := src.span(node)) is None:
        return
    level, text = PRECEDENCE[type(node.op)], src.source

    def tighter(part: ast.AST) -> bool:  # binds tighter than node's operator, and not in brackets of its own
        return isinstance(part, ast.BinOp) and PRECEDENCE.get(type(part.op), 0) > level and \
            (at := src.span(part)) is not None and not text[:at[0]].rstrip().endswith("(")

    if tighter(node.right):  # a - b * c: (a - b) * c
        inner = node.right
        while tighter(inner.left):
            inner = inner.left
        if (joins := src.span(inner.left)) is not None:
            yield node, f"({text[span[0]:joins[1]]}){text[joins[1]:span[1]]}"
    if tighter(node.left):  # a * b + c: a * (b + c)
        inner = node.left
        while tighter(inner.right):
            inner = inner.right
        if (joins := src.span(inner.right)) is not None:
            yield node, f"{text[span[0]:joins[0]]}({text[joins[0]:span[1]]})"
    if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and _whole_number(node.right) is not None and \
            _whole_number(node.left) is None:
        yield from ((node.left, f"({src.grouped(node.left, sums=True)} {sign} 1)") for sign in "-+")


def _mirrored(func: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST],
              defined: set[str]) -> list[tuple[ast.AST, str]]:
    """What the function does to one value done to a parameter it leaves bare: `haystack = normalize(text)` beside
    `query.split()` -> `normalize(query).split()`; `.lower()` likewise. One side of a comparison normalized and the
    other not is a common slip (bugfix-search-case). Wrappers are the module's own one-argument functions."""
    calls = [n for n in nodes if isinstance(n, ast.Call) and len(n.args) == 1 and not n.keywords]
    wrappers = sorted({n.func.id for n in calls if isinstance(n.func, ast.Name) and n.func.id in defined})
    methods = sorted({n.func.attr for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
                      not n.args and n.func.attr in NORMALIZERS})
    wrapped = {id(n.args[0]) for n in calls} | {id(n.func.value) for n in nodes if isinstance(n, ast.Call) and
                                               isinstance(n.func, ast.Attribute) and n.func.attr in NORMALIZERS}
    params = {a.arg for a in func.args.args + func.args.kwonlyargs} - {"self", "cls"}
    bare = [n for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in params and
            id(n) not in wrapped]
    return [(n, f"{w}({n.id})") for n in bare for w in wrappers] + [(n, f"{n.id}.{m}()") for n in bare for m in methods]


def _loosened(src: SourceText, node: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """A condition negated (`if item.done:` -> `if not item.done:`), one operand of an `and`/`or` dropped (a
    condition too specific or too loose), `x += v` as `x = v` (PIT's negated and removed conditionals)."""
    if isinstance(node, (ast.If, ast.While, ast.IfExp)) and not (isinstance(node.test, ast.UnaryOp) and
                                                                 isinstance(node.test.op, ast.Not)):
        yield node.test, f"not {src.grouped(node.test)}"
    elif isinstance(node, ast.BoolOp):
        word = " and " if isinstance(node.op, ast.And) else " or "
        for i in range(len(node.values)):
            rest = node.values[:i] + node.values[i + 1:]
            yield node, word.join(f"({src.text(v)})" if isinstance(v, LOOSE) else src.text(v) for v in rest)
    elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        yield node, f"{src.text(node.target)} = {src.text(node.value)}"


def _accumulated(src: SourceText, func: ast.AST) -> list[tuple[ast.AST, str]]:
    """`total = price` in a loop, where `total` is also set before it, as `total += price`: a sum kept as its last
    term."""
    out = []
    for loop in [n for n in ast.walk(func) if isinstance(n, (ast.For, ast.While))]:
        inside = {id(n) for stmt in loop.body for n in ast.walk(stmt)}
        before = {t.id for n in ast.walk(func) if isinstance(n, ast.Assign) and id(n) not in inside
                  and n.lineno < loop.lineno for t in n.targets if isinstance(t, ast.Name)}
        out += [(n, f"{n.targets[0].id} += {src.text(n.value)}") for stmt in loop.body for n in ast.walk(stmt)
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                and n.targets[0].id in before]
    return out


def _missed_keywords(call: ast.Call, indent: str) -> list[tuple[str, str]]:
    """(keyword, value) for each STDLIB_DEFAULTS keyword the call lacks: `module.name(...)`, or `DictWriter(...)`
    (imported from csv by name); INDENT is `indent`, or as wide as a literal initial_indent."""
    func = call.func
    key = (func.value.id, func.attr) if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else \
        ("csv", "DictWriter") if isinstance(func, ast.Name) and func.id == "DictWriter" else None
    given = {k.arg: k.value for k in call.keywords}
    first = given.get("initial_indent")
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        indent = " " * len(first.value)
    return [(k, indent if v is INDENT else v) for k, v in STDLIB_DEFAULTS.get(key, ()) if k not in given]


def _quoted(value: str) -> str:
    return '"' + repr(value)[1:-1].replace('"', '\\"') + '"'


def _in_fstring(string: ast.JoinedStr) -> Iterator[tuple[ast.AST, str]]:
    """An f-string's stdlib call given a keyword it misses (`f"- {fill(item, 20)}"`: a hanging indent as wide as
    "- "); the f-string is written anew, since 3.11 places its parts loosely."""
    for i, part in enumerate(string.values):
        if not isinstance(part, ast.FormattedValue) or not isinstance(part.value, ast.Call):
            continue
        before = string.values[i - 1] if i else None
        head = before.value.rsplit("\n", 1)[-1] if isinstance(before, ast.Constant) else ""
        for keyword, value in _missed_keywords(part.value, " " * len(head) or "  "):
            changed = copy.deepcopy(string)
            changed.values[i].value.keywords.append(ast.keyword(keyword, ast.Constant(value)))
            yield string, ast.unparse(changed)


def _called_name(call: ast.Call) -> str:
    """`f` of `f(x)` and of `obj.f(x)`; "" for anything else called."""
    return call.func.id if isinstance(call.func, ast.Name) else \
        call.func.attr if isinstance(call.func, ast.Attribute) else ""


def _mirror_called(src: SourceText, node: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """`name.startswith(x)` -> `name.endswith(x)`, `any(...)` -> `all(...)`: the called name's mirror image."""
    if not isinstance(node, ast.Call):
        return
    if (name := _called_name(node)) in MIRRORS and (text := src.text(node.func)).endswith(name):
        yield node.func, text[:-len(name)] + MIRRORS[name]


def _renamed(func: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST],
             attributes: dict[str, set[str]]) -> list[tuple[ast.AST, str]]:
    """Another of the function's variables (parameters and names it binds) read where one is, and another field
    the module reads or sets on the same name (`rect.width` -> `rect.height`): the identifier used is the
    commonest one-statement bug (ManySStuBs4J, Karampatsis and Allamanis 2020). Those used nearest come first."""
    params = {a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs} - {"self", "cls"}
    names = [n for n in nodes if isinstance(n, ast.Name)]
    variables = params | {n.id for n in names if isinstance(n.ctx, ast.Store)}
    called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    fields = [n for n in nodes if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and
              isinstance(n.ctx, ast.Load) and id(n) not in called]
    lines: dict[str, list[int]] = {}
    for n in names:
        lines.setdefault(n.id, []).append(n.lineno)
    for n in fields:
        lines.setdefault(f"{n.value.id}.{n.attr}", []).append(n.lineno)
    # a comprehension's own names exist only inside it: offered there alone
    scoped: dict[str, set[int]] = {}
    for comp in [n for n in nodes if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp))]:
        inside = {id(n) for n in ast.walk(comp)}
        for target in comp.generators:
            for t in ast.walk(target.target):
                if isinstance(t, ast.Name):
                    scoped.setdefault(t.id, set()).update(inside)
    bound = {n.id for n in names if isinstance(n.ctx, ast.Store) and n.id not in scoped} | params
    ranked = [(n, v) for n in names if isinstance(n.ctx, ast.Load) and n.id in variables
              for v in sorted(variables - {n.id}) if v in bound or id(n) in scoped.get(v, ())]
    ranked += [(n, f"{n.value.id}.{a}") for n in fields for a in sorted(attributes.get(n.value.id, set()) - {n.attr})]

    def distance(change: tuple[ast.AST, str]) -> int:  # a field used nowhere in the function: after those used
        node, text = change
        return min((abs(line - node.lineno) for line in lines.get(text, [])), default=1 << 20)
    return sorted(ranked, key=distance)


def _other_constant(node: ast.AST, numbers: list[int]) -> Iterator[tuple[ast.AST, str]]:
    """A number copied from a neighbouring line: `total % 3600` -> `total % 60` when the function uses 60 too."""
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value > 1:
        yield from ((node, repr(v)) for v in numbers if abs(v - node.value) > 1)


def _made_room(src: SourceText, node: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """A cut that leaves room for what is appended to it: `text[:width] + marker` -> `text[:width - len(marker)]
    + marker`, so the whole fits the width."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Subscript) and \
            isinstance(node.left.slice, ast.Slice) and (upper := node.left.slice.upper) is not None and \
            not isinstance(node.right, ast.JoinedStr):
        yield upper, f"{src.grouped(upper, sums=True)} - len({src.text(node.right)})"


def _nudged(src: SourceText, bounds: list[ast.expr]) -> Iterator[tuple[ast.AST, str]]:
    """A bound that is not a plain number, one more and one less (a number changes by itself)."""
    for bound in bounds:
        by_number = isinstance(bound, ast.BinOp) and _whole_number(bound.right) is not None  # n - 1: its 1 changes
        if _whole_number(bound) is None and not by_number and not isinstance(bound, ast.Starred):
            yield bound, f"{src.grouped(bound, sums=True)} + 1"
            yield bound, f"{src.grouped(bound, sums=True)} - 1"
