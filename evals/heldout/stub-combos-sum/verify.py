def verify(run):
    assert run.text("test_combos.py") == run.original("test_combos.py"), "test_combos.py was changed"
    r = run.python("-m", "unittest", "test_combos")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"
