"""A run's outputs for people: the facts a run states (banner, `--dry-run`, end summary), the HTML run report and
the PNG plots.

May import tracking (the console), envs, tasks, models, config and below."""
