"""The training loop and what it needs: the trainer (sample -> generate -> score -> advantages -> update -> log),
the policy update over micro-batches, the rollout batch, checkpoints, interrupts, data-parallel wrapping, resource
checks, and supervised fine-tuning (the cold start).

May import evaluation, reporting, tracking, rollout and everything below; only the API and the CLI import it."""
