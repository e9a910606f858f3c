def verify(run):
    assert run.text("shop/cart.py") == run.original("shop/cart.py"), "shop/cart.py was changed"
    r = run.pytest("tests")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"
    assert "3 passed" in r.stdout, f"no new test was collected: {r.stdout[-300:]}"
    # The new test must catch a remove() that does nothing.
    cart = run.path("shop/cart.py")
    cart.write_text(run.original("shop/cart.py").replace(
        "        self.items = [i for i in self.items if i.name != name]", "        pass"))
    r = run.pytest("tests")
    assert r.returncode != 0, "the tests still pass when Cart.remove does nothing"
