import configparser


def _sections(text):
    cfg = configparser.ConfigParser()
    cfg.read_string(text)
    return {s: dict(cfg[s]) for s in cfg.sections()}


def _comments(text):
    return [line.strip() for line in text.splitlines() if line.strip().startswith((";", "#"))]


def verify(run):
    text = run.text("service.ini")
    try:
        got = _sections(text)
    except configparser.Error as e:
        raise AssertionError(f"service.ini does not parse any more: {e}".splitlines()[0])
    expected = _sections(run.original("service.ini"))
    expected["database"]["connect_timeout"] = "15"
    assert got == expected, f"service.ini holds {got}"
    assert _comments(text) == _comments(run.original("service.ini")), "the comments changed"
