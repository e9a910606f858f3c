def verify(run):
    assert run.text("test_units.py") == run.original("test_units.py"), "test_units.py was changed"
    r = run.python("-m", "pytest", "-q", "test_units.py")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-600:]}"
