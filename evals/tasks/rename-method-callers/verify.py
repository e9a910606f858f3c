def verify(run):
    for name in ("shop/cart.py", "shop/checkout.py", "report.py"):
        assert "compute_sum" not in run.text(name), f"{name} still says compute_sum"
    r = run.python("report.py")
    assert r.returncode == 0 and r.stdout == "subtotal 700\ndue 600\n", f"python report.py prints: {(r.stdout + r.stderr)[-400:]}"
    r = run.python("-c", "from shop.cart import Cart; c = Cart(); c.add('x', 5, 3); print(c.subtotal())")
    assert r.stdout.strip() == "15", f"Cart.subtotal: {(r.stdout + r.stderr)[-300:]}"
