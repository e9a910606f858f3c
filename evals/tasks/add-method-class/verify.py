def verify(run):
    r = run.python("-c", "from shop.cart import Cart\nc = Cart()\nc.add('a', 1.0, 2)\nc.add('b', 2.0, 3)\n"
                         "c.add('a', 1.0, 1)\nprint(c.count(), Cart().count(), c.total())")
    assert r.returncode == 0 and r.stdout.strip() == "6 0 9.0", f"Cart().count() gives: {(r.stdout + r.stderr)[-400:]}"
    r = run.python("-m", "pytest", "-q", "tests")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"
    assert run.text("tests/test_cart.py") == run.original("tests/test_cart.py"), "the tests were changed"
