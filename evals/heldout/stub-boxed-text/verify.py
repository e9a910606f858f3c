def verify(run):
    assert run.text("test_box.py") == run.original("test_box.py"), "test_box.py was changed"
    r = run.python("-m", "unittest", "test_box")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"
