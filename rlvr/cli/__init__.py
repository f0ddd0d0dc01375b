"""The command line: `rlvr train | sft | eval | report | verify | tasks | algorithms | quickstart`.

The top of the house: each command parses its arguments and calls into training, evaluation, reporting or the
verifier tools; nothing below imports from here."""

from rlvr.cli.main import main

__all__ = ["main"]
