import re


def verify(run):
    for name in ("api_client.py", "export.py", "stats.py"):
        assert not re.search(r"\blim\b", run.text(name)), f"{name} still says lim"
    r = run.python("-c", "import inspect; from api_client import paginate; "
                         "print(list(inspect.signature(paginate).parameters))")
    assert r.stdout.strip() == "['records', 'page_size', 'start']", \
        f"paginate's parameters: {(r.stdout + r.stderr)[-300:]}"
    r = run.python("-c", "import export, stats; print(stats.page_count(10), stats.last_page_ids(), "
                         "export.export_csv().count(chr(10)))")
    assert r.stdout.strip() == "3 [17, 18, 19, 20, 21, 22, 23] 4", \
        f"the callers now give: {(r.stdout + r.stderr)[-400:]}"
