def verify(run):
    assert run.text("test_inventory.py") == run.original("test_inventory.py"), "test_inventory.py was changed"
    r = run.python("-m", "unittest", "-q", "test_inventory")
    assert r.returncode == 0, f"the tests in test_inventory.py fail: {(r.stdout + r.stderr)[-800:]}"
