def verify(run):
    assert run.text("invoice.py") == run.original("invoice.py"), "invoice.py was changed; the bug is not in it"
    r = run.python("invoice.py")
    assert r.returncode == 0 and r.stdout == "A-17 total 90.00\nA-18 total 99.00\nA-19 total 112.50\n", \
        f"python invoice.py prints: {(r.stdout + r.stderr)[-400:]}"
    r = run.python("-c", "from pricing import discounted; print(discounted(100), discounted(99.99), discounted(200))")
    assert r.stdout.strip() == "90.0 99.99 180.0", f"pricing.discounted gives: {(r.stdout + r.stderr)[-300:]}"
