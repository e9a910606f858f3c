def verify(run):
    assert run.text("test_envfile.py") == run.original("test_envfile.py"), "test_envfile.py was changed"
    r = run.pytest("test_envfile.py")
    assert r.returncode == 0, f"the tests in test_envfile.py fail: {(r.stdout + r.stderr)[-800:]}"
