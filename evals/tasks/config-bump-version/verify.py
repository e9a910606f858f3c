import re
import tomllib


def _rest(text):
    """The file's non-blank lines other than `version = ...`, without trailing spaces."""
    return [line.rstrip() for line in text.splitlines() if line.strip() and not re.match(r"\s*version\s*=", line)]


def verify(run):
    text = run.text("pyproject.toml")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise AssertionError(f"pyproject.toml is not valid TOML any more: {e}")
    version = data.get("project", {}).get("version")
    assert version == "2.4.0", f"[project] version is {version!r}, not '2.4.0'"
    expected = tomllib.loads(run.original("pyproject.toml"))
    expected["project"]["version"] = "2.4.0"
    changed = sorted(f"{table}" for table in set(data) | set(expected) if data.get(table) != expected.get(table))
    assert data == expected, f"other settings changed too, in: {', '.join(changed)}"
    assert _rest(text) == _rest(run.original("pyproject.toml")), \
        "lines other than the version line changed (a comment, the order or the layout)"
