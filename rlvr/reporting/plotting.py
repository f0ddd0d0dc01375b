"""PNG plots of training runs and evaluations."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def plot_rl_curves(rows: list[dict], path: str | Path, title: str) -> Path:
    """Training reward (per step, and a moving average) and held-out accuracy against RL step."""
    fig, (ax_r, ax_a) = plt.subplots(1, 2, figsize=(11, 4.2))
    steps = [r["step"] for r in rows if r.get("reward/mean") is not None]
    reward = [r["reward/mean"] for r in rows if r.get("reward/mean") is not None]
    ax_r.plot(steps, reward, color="tab:blue", alpha=0.35, label="reward per step")
    window = max(1, len(reward) // 15)
    smooth = [sum(reward[max(0, i - window + 1) : i + 1]) / len(reward[max(0, i - window + 1) : i + 1])
              for i in range(len(reward))]
    ax_r.plot(steps, smooth, color="tab:blue", label=f"moving average ({window} steps)")
    ax_r.set(xlabel="RL step", ylabel="mean reward (training samples)", title="Training reward")
    ax_r.legend(loc="lower right")
    ev = [(r["step"], r["eval/accuracy"]) for r in rows if r.get("eval/accuracy") is not None]
    ax_a.plot([s for s, _ in ev], [100 * a for _, a in ev], marker="o", color="tab:green", label="greedy, held-out")
    ax_a.set(xlabel="RL step", ylabel="accuracy (%)", title="Held-out accuracy", ylim=(0, 100))
    ax_a.legend(loc="lower right")
    for ax in (ax_r, ax_a):
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_pass_at_k(data: dict, path: str | Path) -> Path:
    """pass@k and maj@k against k (log2 axis) for each evaluated model, with 95% bootstrap bands (eval.json)."""
    ks = data["k"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), sharey=True)
    for ax, family, title in ((axes[0], "pass", "pass@k: some sample of k is correct"),
                              (axes[1], "maj", "maj@k: the majority answer of k is correct")):
        for i, model in enumerate(data["models"]):
            stats = [model["metrics"][f"{family}@{k}"] for k in ks]
            color = f"C{i}"
            ax.plot(ks, [100 * s["value"] for s in stats], marker="o", color=color, label=model["label"])
            ax.fill_between(ks, [100 * s["ci95"][0] for s in stats], [100 * s["ci95"][1] for s in stats],
                            color=color, alpha=0.18, linewidth=0)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set(xlabel="k (samples per problem)", title=title, ylim=(0, 100))
        ax.grid(alpha=0.3)
        ax.legend(loc="best", title="model (band: 95% CI)")
    axes[0].set_ylabel("problems solved (%)")
    fig.suptitle(f"{data['task']}: {data['problems']} held-out problems, {data['samples']} samples each "
                 f"(temperature {data['temperature']})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


SOLVE_RATE_BINS = ((0.0, 0.0, "never\n(0)"), (0.0, 0.25, "rarely\n(0-25%]"), (0.25, 0.5, "(25-50%]"),
                   (0.5, 0.75, "(50-75%]"), (0.75, 1.0, "(75-100%)"), (1.0, 1.0, "always\n(100%)"))


def plot_boundary(data: dict, path: str | Path) -> Path:
    """Left: how the problems spread over per-problem solve rates (correct samples / N) for each model.
    Right: for each pair of models, problems solved (some correct sample) by only one of them."""
    fig, (ax_h, ax_b) = plt.subplots(1, 2, figsize=(12, 4.4), gridspec_kw={"width_ratios": [3, 2]})
    models = data["models"]
    width = 0.8 / len(models)
    for i, model in enumerate(models):
        rates = [p["correct"] / p["samples"] for p in model["problems"]]
        counts = [sum(1 for r in rates if (lo < r <= hi) or (lo == hi == r)) for lo, hi, _ in SOLVE_RATE_BINS]
        xs = [j + (i - (len(models) - 1) / 2) * width for j in range(len(SOLVE_RATE_BINS))]
        ax_h.bar(xs, counts, width=width, color=f"C{i}", label=model["label"])
    ax_h.set_xticks(range(len(SOLVE_RATE_BINS)), [label for *_, label in SOLVE_RATE_BINS])
    ax_h.set(xlabel=f"fraction of the {data['samples']} samples that are correct", ylabel="problems",
             title="Per-problem solve rate")
    ax_h.legend(title="model")
    color = {m["label"]: f"C{i}" for i, m in enumerate(models)}
    rows = []  # (label, count, color), top to bottom
    for b in data["boundary"]:
        prefix = f"{b['a']} vs {b['b']}: " if len(data["boundary"]) > 1 else ""
        rows += [(f"{prefix}only {b['a']}", len(b["only_a"]), color[b["a"]]),
                 (f"{prefix}only {b['b']}", len(b["only_b"]), color[b["b"]]),
                 (f"{prefix}both", b["solved_by_both"], "tab:gray"), (f"{prefix}neither", b["neither"], "lightgray")]
    if not rows:
        ax_b.text(0.5, 0.5, "one model: no pair to compare", ha="center", va="center", transform=ax_b.transAxes)
    ys = list(range(len(rows)))[::-1]
    ax_b.barh(ys, [count for _, count, _ in rows], color=[c for *_, c in rows])
    for y, (_, count, _) in zip(ys, rows):
        ax_b.annotate(str(count), (count, y), xytext=(3, 0), textcoords="offset points", va="center")
    ax_b.set_yticks(ys, [label for label, *_ in rows])
    ax_b.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax_b.set(xlabel=f"problems solved by some of {data['samples']} samples",
             title=f"Reasoning boundary at k = {data['samples']}")
    ax_b.margins(x=0.15)
    for ax in (ax_h, ax_b):
        ax.grid(alpha=0.3, axis="y" if ax is ax_h else "x")
    fig.suptitle(f"{data['task']}: what each model can solve at all")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
