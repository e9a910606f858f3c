"""Memory files: locations and order, @imports (relative, nested, cycles, depth, missing), a real git repo."""
import subprocess

from agent.core.memory import expand_imports, load_memory, memory_paths, render_memory
from agent.paths import repo_root


def test_order_from_user_files_to_the_cwd(tmp_path):
    home, claude, repo = tmp_path / "home", tmp_path / "claude", tmp_path / "repo"
    sub = repo / "pkg" / "inner"
    sub.mkdir(parents=True)
    home.mkdir()
    claude.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    for path, text in [(home / "AGENTS.md", "user agents"), (claude / "CLAUDE.md", "user claude"),
                       (repo / "AGENTS.md", "root agents"), (repo / "CLAUDE.local.md", "root local"),
                       (repo / "pkg" / "CLAUDE.md", "pkg claude"), (sub / "AGENTS.md", "inner agents"),
                       (tmp_path / "AGENTS.md", "outside the repo: not read")]:
        path.write_text(text + "\n")
    assert repo_root(sub) == repo.resolve()
    files = load_memory(sub, repo_root(sub), home, claude)
    assert [(f.path, f.text) for f in files] == [
        (home / "AGENTS.md", "user agents\n"), (claude / "CLAUDE.md", "user claude\n"),
        (repo / "AGENTS.md", "root agents\n"), (repo / "CLAUDE.local.md", "root local\n"),
        (repo / "pkg" / "CLAUDE.md", "pkg claude\n"), (sub / "AGENTS.md", "inner agents\n")]


def test_outside_a_repo_only_the_cwd_is_read(tmp_path):
    (tmp_path / "AGENTS.md").write_text("parent\n")
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "CLAUDE.md").write_text("here\n")
    assert repo_root(cwd) == cwd.resolve()
    assert memory_paths(cwd, repo_root(cwd), tmp_path / "none", tmp_path / "none") == [cwd / "CLAUDE.md"]


def test_imports_relative_nested_cycles_missing_and_fenced(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "AGENTS.md").write_text("top\n@docs/style.md\n@missing.md\n```\n@docs/style.md\n```\nend\n")
    (tmp_path / "docs" / "style.md").write_text("style\n@../AGENTS.md\n@more.md\n")
    (tmp_path / "docs" / "more.md").write_text("more\n")
    assert expand_imports(tmp_path / "AGENTS.md", roots=(tmp_path.resolve(),)) == (
        "top\nstyle\nmore\n(import missing.md not found)\n```\n@docs/style.md\n```\nend\n")


def test_import_depth_is_limited(tmp_path):
    for i in range(7):
        (tmp_path / f"f{i}.md").write_text(f"level {i}\n@f{i + 1}.md\n")
    (tmp_path / "f7.md").write_text("level 7\n")
    assert expand_imports(tmp_path / "f0.md", roots=(tmp_path.resolve(),)) == (
        "level 0\nlevel 1\nlevel 2\nlevel 3\nlevel 4\n(import f5.md skipped: imports nest deeper than 4)\n")


def test_render(tmp_path):
    (tmp_path / "AGENTS.md").write_text("Use tabs.\n")
    (tmp_path / "CLAUDE.md").write_text("\n")
    files = load_memory(tmp_path, tmp_path, tmp_path / "x", tmp_path / "y")
    assert render_memory(files) == (f"Contents of {tmp_path / 'AGENTS.md'} (instructions from the user or project; "
                                    "follow them):\n\nUse tabs.")
