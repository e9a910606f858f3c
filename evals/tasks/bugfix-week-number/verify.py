def verify(run):
    assert run.text("test_rota.py") == run.original("test_rota.py"), "test_rota.py was changed"
    r = run.python("-m", "pytest", "-q", "test_rota.py")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-600:]}"
