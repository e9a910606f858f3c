"""Agent task suite: tasks with executable verifiers, the runner behind `agent eval`, and reports."""
