def verify(run):
    assert run.text("test_cart.py") == run.original("test_cart.py"), "test_cart.py was changed"
    r = run.python("-m", "unittest", "test_cart")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"
    # The bug is in tax.py: fixed there, tax_for itself is right, not only the cart's total.
    r = run.python("-c", "from tax import tax_for; print(tax_for(200, 'CA'), tax_for(80, 'NY'))")
    assert r.stdout == "14.5 3.2\n", f"tax_for(200, 'CA'), tax_for(80, 'NY') gave {(r.stdout + r.stderr)[-300:]!r}"
