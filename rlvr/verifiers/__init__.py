"""Verifiers: rule-based checks of a completion against a reference (math answers; see docs/verifiers.md).

Import the submodules directly (rlvr.verifiers.math needs the 'math' extra, math-verify)."""
