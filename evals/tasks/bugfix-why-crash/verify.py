def verify(run):
    assert run.text("app.py") == run.original("app.py"), "app.py was changed"
    r = run.python("app.py")
    assert r.returncode == 0 and r.stdout == ("north: avg 12.83, spread 4.5\nsouth: avg 0.00, spread 0.0\n"
                                              "east: avg 9.25, spread 0.5\n"), \
        f"python app.py prints: {(r.stdout + r.stderr)[-400:]}"
