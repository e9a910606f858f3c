"""Tool arguments bound to the project while a small model decodes in the free loop (agent/core/bindings.py):
the overrides, that the loop sends them only for such profiles, and that the real grammar compiler takes them."""
import pytest

from agent.core.bindings import bound_overrides
from agent.core.context import tool_schemas
from agent.core.loop import Agent, LoopConfig
from agent.core.profile import choose_profile
from agent.core.transcript import Session
from agent.engines.scripted import ScriptedEngine
from tools import builtin_tools
from tools._files import remember
from tools.base import ToolContext


@pytest.fixture
def proj(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    p = tmp_path / "proj"
    (p / "pkg").mkdir(parents=True)
    (p / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (p / "pkg" / "util.py").write_text("X = 1\n")
    return p


def test_read_names_a_project_file_write_a_path_inside_and_edit_a_read_files_lines(proj):
    schemas = tool_schemas(builtin_tools())
    ctx = ToolContext(cwd=proj)
    before = bound_overrides(schemas, ctx)
    assert before["Read"]["properties"]["file_path"]["enum"] == ["calc.py", "pkg/util.py"]
    assert before["Write"]["properties"]["file_path"]["pattern"].startswith("([A-Za-z0-9_]")
    assert "Edit" not in before  # nothing read yet: nothing to bind old_string to
    remember(ctx, proj / "calc.py")
    edit = bound_overrides(schemas, ctx)["Edit"]["properties"]
    assert edit["file_path"]["enum"] == ["calc.py"]
    assert edit["old_string"]["x-substring-of"] == "def add(a, b):\n    return a - b\n"
    plain = next(s["function"]["parameters"] for s in schemas if s["function"]["name"] == "Edit")
    assert edit["new_string"] == plain["properties"]["new_string"]  # only the bound fields change


def test_a_large_project_keeps_the_plain_schemas(proj, monkeypatch):
    monkeypatch.setattr("agent.core.bindings.MAX_FILES", 1)
    assert bound_overrides(tool_schemas(builtin_tools()), ToolContext(cwd=proj)) == {}


@pytest.mark.parametrize("profile,bound", [("small", True), ("default", False)])
def test_the_free_loop_sends_the_bindings_only_for_profiles_that_ask(proj, profile, bound):
    engine = ScriptedEngine([{"text": "done"}])
    agent = Agent(engine, builtin_tools(), Session.create(proj), ToolContext(cwd=proj), system_prompt="s",
                  profile=choose_profile(None, profile), config=LoopConfig(max_turns=2))
    agent.run("look around")
    overrides = engine.requests[0].tool_overrides
    assert (overrides is not None and "enum" in overrides["Read"]["properties"]["file_path"]) == bound


def test_the_grammar_compiler_takes_the_bound_schemas(proj, tiny_gguf_path, tmp_path):
    from runtime.constrain import grammar_tools
    from runtime.engine import LocalEngine
    from runtime.options import RuntimeOptions
    engine = LocalEngine.from_spec(str(tiny_gguf_path), RuntimeOptions(threads=2, prefix_cache_bytes=0),
                                   cache_dir=tmp_path / "cache")
    schemas = tool_schemas(builtin_tools())
    ctx = ToolContext(cwd=proj)
    remember(ctx, proj / "calc.py")
    overrides = bound_overrides(schemas, ctx)
    compiled = engine.grammars.prepare(grammar_tools(schemas, None, overrides)).result()
    assert compiled.loose is False
