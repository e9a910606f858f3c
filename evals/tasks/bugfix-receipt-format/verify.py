def verify(run):
    assert run.text("test_receipt.py") == run.original("test_receipt.py"), "test_receipt.py was changed"
    r = run.python("-m", "pytest", "-q", "test_receipt.py")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-600:]}"
