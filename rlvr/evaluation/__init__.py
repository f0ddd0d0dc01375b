"""Measuring a policy or a verifier: held-out evaluation (greedy accuracy, pass@k, maj@k), its estimators and
report, checks of evaluation settings, and the verifier tools (offline scoring of completion files, the audit of the
math verifier against labelled rows).

May import rollout, rewards, tasks, models, config and below; never training or the command line."""
