"""agent/ has no import circle, counting imports inside functions too; and files stay small."""
import ast
from pathlib import Path

AGENT = Path(__file__).resolve().parents[2] / "agent"


def module_name(path: Path) -> str:
    parts = path.relative_to(AGENT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, known: set[str]) -> list[tuple[str, int, bool]]:
    """(imported agent module, line, inside a function) for every import in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    local_lines = {n.lineno for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:  # agent.core.loop.Agent -> agent.core.loop
                name = name.rpartition(".")[0]
            if name and name != here:
                out.append((name, node.lineno, node.lineno in local_lines))
    return out


def graph() -> dict[str, set[str]]:
    files = [p for p in AGENT.rglob("*.py")]
    known = {module_name(p) for p in files}
    edges: dict[str, set[str]] = {m: set() for m in known}
    for p in files:
        for target, _, _ in imports(p, known):
            if not (target == "agent" or module_name(p).startswith(target + ".")):  # a package's own __init__
                edges[module_name(p)].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_agent_has_no_import_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_function_local_imports_say_why():
    """Local imports only keep `agent --help` fast or load optional parts; each carries its reason."""
    missing = []
    for path in AGENT.rglob("*.py"):
        lines = path.read_text(encoding="utf-8").splitlines()
        tree = ast.parse("\n".join(lines))
        for f in ast.walk(tree):
            if not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for n in ast.walk(f):
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    line, above = lines[n.lineno - 1], lines[n.lineno - 2].strip()
                    if "#" not in line and not above.startswith("#"):
                        missing.append(f"{path.relative_to(AGENT.parent)}:{n.lineno}")
    assert missing == []


def test_no_file_in_agent_passes_400_lines():
    long = {str(p.relative_to(AGENT.parent)): n for p in AGENT.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}
