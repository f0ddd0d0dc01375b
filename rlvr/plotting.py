"""PNG plots of training runs."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


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
