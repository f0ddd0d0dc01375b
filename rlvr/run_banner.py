"""What a training run says at its start and at its end, as labelled facts (label -> text).

The start facts answer "is this the run I meant?" (where it writes, the model and its size, the device, the
tasks and their sizes, the batch, the resolved algorithm); the end facts answer "what came out, and what next?"."""

from __future__ import annotations

from pathlib import Path

from rlvr.config import RunConfig
from rlvr.tracking.console import clock


def human_count(n: int) -> str:
    """1234567 -> '1.23M'."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def _size(task, split: str) -> str:
    size = task.size(split)
    return "procedural" if size is None else f"{size:,}"


def start_facts(cfg: RunConfig, tasks: list, model, device: str, resumed_from: Path | None,
                start_step: int) -> dict[str, str]:
    """The start banner's facts for a run about to train from `start_step`."""
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    d, r, a, o = cfg.data, cfg.rollout, cfg.algorithm, cfg.optim
    size = f"{human_count(total)} parameters" + (f", {human_count(trainable)} trainable" if trainable != total else "")
    facts = {"output": str(Path(cfg.tracking.output_dir).resolve()),
             "model": f"{cfg.model.name} ({size}, {cfg.model.dtype})", "device": device}
    if resumed_from is not None:
        facts["resumed from"] = f"{resumed_from} (step {start_step})"
    for task, tc in zip(tasks, d.tasks):
        facts[f"task {task.label}"] = (f"{task.name}: {_size(task, 'train')} train / {_size(task, 'eval')} eval "
                                       f"prompts, weight {tc.weight:g}")
    samples = d.prompts_per_step * r.samples_per_prompt
    facts["schedule"] = (f"{cfg.steps} steps x {d.prompts_per_step} prompts x {r.samples_per_prompt} samples "
                         f"= {samples} completions per step, up to {r.max_new_tokens} new tokens each")
    resolved = (f"advantage {a.advantage}, loss {a.policy_loss} (clip {a.clip_eps_low:g}/{a.clip_eps_high:g}), "
                f"aggregation {a.loss_aggregation}, kl_coef {a.kl_coef:g}, lr {o.lr:g}")
    if d.filter.name != "none":
        resolved += f", filter {d.filter.name}"
    facts["algorithm"] = (f"preset {a.preset}: " if a.preset else "") + resolved
    facts["rewards"] = ", ".join(f"{f.metric_name} x {f.weight:g}" for f in cfg.rewards.functions)
    sinks = ["metrics.jsonl", "completions.jsonl", *cfg.tracking.sinks()]
    facts["logging to"] = ", ".join(sinks)
    return facts


def end_facts(cfg: RunConfig, metrics: dict[str, float], wall_s: float, checkpoint: Path | None,
              best: dict | None, report: Path | None) -> dict[str, str]:
    """The end summary's facts: final metrics, where the model is, failures per reward, and the next commands."""
    out = Path(cfg.tracking.output_dir)
    shown = ("reward/mean", "accuracy", "eval/accuracy", "response_length/mean", "actor/entropy")
    facts = {"final": "  ".join(f"{k}={metrics[k]:.4g}" for k in shown if isinstance(metrics.get(k), (int, float)))}
    facts["wall time"] = clock(wall_s)
    failures = []
    for f in cfg.rewards.functions:
        name = f.metric_name
        counts = {kind: _total(out, f"reward/{name}/{kind}") for kind in ("errors", "timeouts", "crashes")}
        failures.append(f"{name}: " + (", ".join(f"{v} {k}" for k, v in counts.items() if v) or "none"))
    facts["reward failures"] = "; ".join(failures)
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


def _total(output_dir: Path, key: str) -> int:
    """The sum of a per-step count over metrics.jsonl (0 when the file or key is missing)."""
    import json

    path = output_dir / "metrics.jsonl"
    if not path.is_file():
        return 0
    total = 0
    for line in path.read_text().splitlines():
        try:
            total += int(json.loads(line).get(key) or 0)
        except ValueError:
            continue
    return total
