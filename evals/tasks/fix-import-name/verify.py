def verify(run):
    r = run.python("main.py")
    assert r.returncode == 0 and r.stdout == "Name: Ada Lovelace\n", f"main.py: {(r.stdout + r.stderr)[-300:]}"
    assert run.text("helpers.py") == run.original("helpers.py"), "helpers.py was changed; the bug is in main.py"
