def verify(run):
    assert run.text("test_inventory.py") == run.original("test_inventory.py"), "test_inventory.py was changed"
    r = run.python("-m", "unittest", "test_inventory")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"
