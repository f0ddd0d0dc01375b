"""The benchmarks behind docs/results.md and docs/performance.md. Each is a script; those that share code
(benchmarks.common) run from the repository root as modules, `python -m benchmarks.<name> ...`, so that they and the
tests import that code as this package."""
