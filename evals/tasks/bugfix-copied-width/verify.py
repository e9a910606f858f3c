def verify(run):
    assert run.text("test_shapes.py") == run.original("test_shapes.py"), "test_shapes.py was changed"
    r = run.python("-m", "pytest", "-q", "test_shapes.py")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-600:]}"
