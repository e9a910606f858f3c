def verify(run):
    assert run.text("test_versions.py") == run.original("test_versions.py"), "test_versions.py was changed"
    r = run.python("-m", "unittest", "-q", "test_versions")
    assert r.returncode == 0, f"the tests in test_versions.py fail: {(r.stdout + r.stderr)[-800:]}"
