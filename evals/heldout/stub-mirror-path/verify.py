def verify(run):
    assert run.text("test_sitepaths.py") == run.original("test_sitepaths.py"), "test_sitepaths.py was changed"
    r = run.python("-m", "unittest", "test_sitepaths")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"
