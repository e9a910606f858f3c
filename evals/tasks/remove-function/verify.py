import ast


def verify(run):
    text = run.text("billing.py")
    names = [n.name for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)]
    assert names == ["net_total", "gross_total"], f"billing.py now defines {names}"
    assert "VAT = 0.2" in text, "billing.py lost VAT"
    r = run.python("statement.py")
    assert r.returncode == 0 and r.stdout == "net 42.50 gross 51.00\n", \
        f"python statement.py prints: {(r.stdout + r.stderr)[-400:]}"
    assert run.text("statement.py") == run.original("statement.py"), "statement.py was changed"
