"""TodoWrite: validates, replaces ctx.todos in place, renders a checklist, warns on several in_progress."""
from __future__ import annotations

from tools.base import ToolContext, ToolResult
from tools.todo import TodoWriteTool


def test_stores_and_renders_checklist():
    ctx = ToolContext(cwd=".")
    held = ctx.todos  # the harness may keep this reference
    todos = [{"content": "Read the parser", "status": "completed", "activeForm": "Reading the parser"},
             {"content": "Fix the bug", "status": "in_progress", "id": "2"},
             {"content": " Run the tests ", "status": "pending", "priority": "high"}]  # unknown keys ignored
    result = TodoWriteTool().run({"todos": todos}, ctx)
    stored = [{"content": "Read the parser", "status": "completed", "activeForm": "Reading the parser"},
              {"content": "Fix the bug", "status": "in_progress", "id": "2"},
              {"content": "Run the tests", "status": "pending"}]
    assert result == ToolResult("Todos (1/3 done):\n[x] Read the parser\n[~] Fix the bug\n[ ] Run the tests",
                                data={"todos": stored, "old_todos": []})
    assert held is ctx.todos and ctx.todos == stored


def test_several_in_progress_is_a_warning_not_an_error():
    ctx = ToolContext(cwd=".")
    result = TodoWriteTool().run({"todos": [{"content": "a", "status": "in_progress"},
                                            {"content": "b", "status": "in_progress"}]}, ctx)
    assert not result.is_error
    assert result.content == ("Todos (0/2 done):\n[~] a\n[~] b\n"
                              "Note: 2 items are in_progress; keep one at a time and finish it before the next.")
    assert len(ctx.todos) == 2


def test_validation_errors_leave_the_list_alone_and_empty_list_clears():
    ctx = ToolContext(cwd=".", todos=[{"content": "keep", "status": "pending"}])
    tool = TodoWriteTool()
    assert tool.run({"todos": [{"content": "x", "status": "done"}]}, ctx) == ToolResult(
        "In todos[0]: Argument status must be one of pending, in_progress, completed; got 'done'.", is_error=True)
    assert tool.run({"todos": [{"content": "  ", "status": "pending"}]}, ctx) == ToolResult(
        "todos[0].content is empty; describe the task.", is_error=True)
    assert tool.run({"todos": [{"status": "pending"}]}, ctx).content == \
        "In todos[0]: Missing required argument(s): content."
    assert ctx.todos == [{"content": "keep", "status": "pending"}]
    result = tool.run({"todos": []}, ctx)
    assert (result.content, ctx.todos) == ("Todo list cleared.", [])
    assert result.data["old_todos"] == [{"content": "keep", "status": "pending"}]
