def verify(run):
    assert run.text("test_notes.py") == run.original("test_notes.py"), "test_notes.py was changed"
    r = run.pytest("test_notes.py")
    assert r.returncode == 0, f"the tests in test_notes.py fail: {(r.stdout + r.stderr)[-800:]}"
