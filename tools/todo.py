"""TodoWrite: replace the session's todo list and show it back as a checklist."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tools._args import check_args
from tools.base import ToolContext, ToolResult

MARKS = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}


def render_todos(todos: list[dict]) -> str:
    """A compact checklist; the harness shows the same text at the tail of the context."""
    done = sum(t["status"] == "completed" for t in todos)
    lines = [f"Todos ({done}/{len(todos)} done):"]
    lines += [f"{MARKS[t['status']]} {t['content']}" for t in todos]
    return "\n".join(lines)


@dataclass
class TodoWriteTool:
    name: ClassVar[str] = "TodoWrite"
    read_only: ClassVar[bool] = True  # changes only the session's list, never files
    description: ClassVar[str] = (
        "Replace your todo list for a multi-step task; send the whole list each time. status is pending, "
        "in_progress (one item at a time) or completed; mark an item completed as soon as it is done.")
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "description": "The step, as an imperative sentence"},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                        "activeForm": {"type": "string", "description": "Shown while in progress: \"Running the tests\""},
                        "id": {"type": "string"},
                    },
                    "required": ["content", "status"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["todos"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        args, error = check_args(self.input_schema, args)
        if error:
            return ToolResult(error, is_error=True)
        todos = args["todos"]
        for i, todo in enumerate(todos):
            todo["content"] = todo["content"].strip()
            if not todo["content"]:
                return ToolResult(f"todos[{i}].content is empty; describe the task.", is_error=True)
        old = list(ctx.todos)
        ctx.todos[:] = todos  # in place: the harness may hold a reference to the list
        if not todos:
            return ToolResult("Todo list cleared.", data={"todos": [], "old_todos": old})
        text = render_todos(todos)
        active = sum(t["status"] == "in_progress" for t in todos)
        if active > 1:
            text += f"\nNote: {active} items are in_progress; keep one at a time and finish it before the next."
        return ToolResult(text, data={"todos": todos, "old_todos": old})
