"""`python -m agent` = the `agent` command."""
import sys

from agent.cli import main

sys.exit(main())
