def verify(run):
    r = run.python("greet.py")
    assert r.stdout == "Hello, world!\n", f"greet.py prints {(r.stdout + r.stderr)[-200:]!r}"
    assert run.text("greet.py") == run.original("greet.py").replace("Helo", "Hello"), "more than the typo changed"
