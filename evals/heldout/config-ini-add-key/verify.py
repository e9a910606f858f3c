import configparser


def verify(run):
    cfg = configparser.ConfigParser()
    try:
        cfg.read_string(run.text("deploy.ini"))
    except configparser.Error as e:
        raise AssertionError(f"deploy.ini does not parse: {str(e).splitlines()[0]}")
    got = {s: dict(cfg[s]) for s in cfg.sections()}
    assert got == {"web": {"bind": "0.0.0.0:8000", "workers": "3"},
                   "worker": {"concurrency": "8", "queue": "thumbnails", "retries": "3"},
                   "storage": {"bucket": "thumbs-prod", "region": "eu-west-1"}}, f"deploy.ini is {got}"
    lines = run.text("deploy.ini").splitlines()
    kept = [ln for ln in run.original("deploy.ini").splitlines() if ln.startswith(";")]
    assert [ln for ln in lines if ln.startswith(";")] == kept, "the comments in deploy.ini were not kept"
