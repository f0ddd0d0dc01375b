"""What a training run says at its start and at its end, as labelled facts (label -> text).

The start facts answer "is this the run I meant?" (where it writes, the model and its size, the device, the
tasks and their sizes, the batch, the resolved algorithm); the end facts answer "what came out, and what next?"."""

from __future__ import annotations

from pathlib import Path

from rlvr.config import RunConfig
from rlvr.reporting.run_facts import parameter_counts, run_facts
from rlvr.tracking.console import clock


def start_facts(cfg: RunConfig, tasks: list, model, tokenizer, encode, resumed_from: Path | None,
                start_step: int) -> dict[str, str]:
    """The start banner's facts for a run about to train from `start_step`: where it writes, the run's facts (as
    `--dry-run` shows them), the device, where it resumed from and where it logs."""
    described = run_facts(cfg, tasks, tokenizer, encode, *parameter_counts(model))
    facts = {"output": str(Path(cfg.tracking.output_dir).resolve()),
             **{label: value for label, value in described.items() if label != "output"},
             "device": str(next(model.parameters()).device)}
    if resumed_from is not None:
        facts["resumed from"] = f"{resumed_from} (step {start_step})"
    facts["logging to"] = ", ".join(["metrics.jsonl", "completions.jsonl", *cfg.tracking.sinks()])
    return facts


def end_facts(cfg: RunConfig, metrics: dict[str, float], wall_s: float, checkpoint: Path | None,
              reward_failures: str, best: dict | None, report: Path | None) -> dict[str, str]:
    """The end summary's facts: final metrics, where the model is, failures per reward (the run's FailureBudget
    summary) and the next commands."""
    out = Path(cfg.tracking.output_dir)
    shown = ("reward/mean", "accuracy", "eval/accuracy", "response_length/mean", "actor/entropy")
    facts = {"final": "  ".join(f"{k}={metrics[k]:.4g}" for k in shown if isinstance(metrics.get(k), (int, float)))}
    facts["wall time"] = clock(wall_s)
    facts["reward failures"] = reward_failures.removeprefix("reward failures: ")
    if checkpoint is not None:
        facts["checkpoint"] = str(checkpoint)
    if best is not None:
        facts["best model"] = f"{out / 'best'} ({best['metric']}={best['value']:.4g} at step {best['step']})"
    if report is not None:
        facts["report"] = str(report)
    model = out / "best" if best is not None else checkpoint
    nxt = [f"rlvr eval {model} --samples 8 --output {out / 'eval'}"] if model is not None else []
    nxt.append(f"rlvr report {out}")
    facts["next"] = "\n".join(nxt)
    return facts
