"""Verifiers: rule-based checks of a completion against a reference (math answers; see docs/verifiers.md).

Import the submodules directly (rlvr.verifiers.math needs the 'math' extra, math-verify). Imports nothing of
rlvr but errors: the tools that run verifiers over files live in rlvr.evaluation."""
