"""Fixtures shared by the pipeline's test files."""
import pytest

from agent.core import events as ev
from agent.core.loop import Agent, LoopConfig
from agent.core.permissions import Permissions
from agent.core.profile import choose_profile
from agent.core.transcript import Session
from agent.engines.scripted import ScriptedEngine
from agent.pipeline.driver import PipelineDriver
from hooks.settings import PermissionSettings, SourcedRule
from tools import builtin_tools
from tools.base import ToolContext


@pytest.fixture
def pipeline_proj(tmp_path, monkeypatch):
    """An empty project folder, with the session data kept beside it."""
    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "proj").mkdir()
    return tmp_path / "proj"


@pytest.fixture
def pipeline_agent():
    """make(proj, turns) -> (agent, engine, steps): the small profile's pipeline over a scripted engine, Bash allowed,
    acceptEdits; `steps` collects the (step, detail) pairs the user sees."""
    def make(proj, turns, tries=1, oracle=False, fresh=False, focus=False, mutants=False):
        engine = ScriptedEngine(turns)
        settings = PermissionSettings(allow=[SourcedRule("Bash", "test")])
        agent = Agent(engine, builtin_tools(), Session.create(proj), ToolContext(cwd=proj, read_window=200),
                      system_prompt="s", permissions=Permissions(settings, "acceptEdits", proj),
                      profile=choose_profile(None, "small"), config=LoopConfig(max_turns=8))
        agent.driver = PipelineDriver(proj)
        agent.driver.config.tries, agent.driver.config.oracle = tries, oracle
        agent.driver.config.fresh, agent.driver.config.focus = fresh, focus
        agent.driver.config.mutants = mutants
        steps = []
        agent.bus.subscribe(lambda e: steps.append((e.step, e.detail)) if isinstance(e, ev.PipelineStep) else None)
        return agent, engine, steps
    return make
