def verify(run):
    assert run.text("shop/cart.py") == run.original("shop/cart.py"), "shop/cart.py was changed; the crash is not there"
    r = run.python("-m", "shop.report", "apple:0.5", "pen:2:3")
    want = "apple        1 x 0.50\npen          3 x 2.00\ntotal      6.50\n"
    assert r.returncode == 0 and r.stdout == want, f"python -m shop.report apple:0.5 pen:2:3 prints: {(r.stdout + r.stderr)[-400:]}"
