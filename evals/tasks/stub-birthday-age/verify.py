def verify(run):
    assert run.text("test_membership.py") == run.original("test_membership.py"), "test_membership.py was changed"
    r = run.pytest("test_membership.py")
    assert r.returncode == 0, f"the tests in test_membership.py fail: {(r.stdout + r.stderr)[-800:]}"
