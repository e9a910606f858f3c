def verify(run):
    for name in ("imaging/ops.py", "thumbs.py", "banner.py"):
        assert "keep_ratio" not in run.text(name), f"{name} still says keep_ratio"
    r = run.python("-c", "import inspect; from imaging.ops import resize; "
                         "print(list(inspect.signature(resize).parameters))")
    assert r.stdout.strip() == "['size', 'width', 'height', 'preserve_aspect']", \
        f"resize's parameters: {(r.stdout + r.stderr)[-300:]}"
    r = run.python("-c", "import thumbs, banner; print(thumbs.thumbnail((800, 600)), thumbs.preview((800, 600)), "
                         "banner.banner((1600, 900)), banner.banner((1600, 900), stretch=True))")
    assert r.stdout.strip() == "(64, 64) (320, 240) (533, 300) (1200, 300)", \
        f"thumbs / banner now give: {(r.stdout + r.stderr)[-400:]}"
