def verify(run):
    assert run.text("test_batches.py") == run.original("test_batches.py"), "test_batches.py was changed"
    r = run.pytest("test_batches.py")
    assert r.returncode == 0, f"the tests in test_batches.py still fail: {(r.stdout + r.stderr)[-800:]}"
    # Beyond the tests: a generator as input, and batches that are distinct lists.
    r = run.python("-c", "from batches import batched; b = batched((i * i for i in range(7)), 2); "
                         "b[0].append('x'); print(b, len({id(x) for x in b}))")
    assert r.stdout.strip() == "[[0, 1, 'x'], [4, 9], [16, 25], [36]] 4", \
        f"batches.batched gives: {(r.stdout + r.stderr)[-400:]}"
