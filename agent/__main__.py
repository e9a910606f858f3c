"""`python -m agent` = the `agent` command."""
from agent.cli import main
from runtime.process_end import run_and_exit

run_and_exit(main)
