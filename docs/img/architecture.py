"""Draws docs/img/architecture.png: the packages of rlvr as the layers of .importlinter (top imports bottom) with the
pipeline of one training step drawn across them.   python docs/img/architecture.py"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

LAYERS = [  # top to bottom, as in .importlinter; each: [(package, what it does)]
    [("cli/", "rlvr train | sft | eval | report | verify")],
    [("api.py", "rlvr.train, rlvr.sft"), ("quickstart.py", "the demo")],
    [("training/", "the loop: trainer, update, advantages, checkpoints, sft")],
    [("evaluation/", "held-out eval, pass@k, verifier audit")],
    [("reporting/", "run facts, HTML report, plots")],
    [("tracking/", "metrics, completions, console, sinks")],
    [("assembly.py", "one set-up: tasks, reward pool started, model, engine")],
    [("rollout/", "engines, episodes, collecting a step, workers")],
    [("envs/", "multi-turn environments, tools"), ("curriculum/", "samplers, filters, stats")],
    [("rewards/", "reward functions, worker pool, shaping")],
    [("tasks/", "prompt sources + their verifiers")],
    [("verifiers/", "rule checkers (math)"), ("sandbox/", "isolated untrusted code")],
    [("models/", "loading, LoRA, logprobs, chat templates")],
    [("config/", "the schema per section, recipes, overrides")],
    [("algorithms/", "advantages, losses, KL, aggregation (pure)")],
    [("distributed.py", "rank plumbing"), ("registry.py", "name -> piece")],
    [("errors.py", "errors for people")],
]
STAGES = {  # package -> the pipeline stage it carries (colour)
    "curriculum/": ("1 sample prompts", "#cfe2ff"), "rollout/": ("2 generate", "#d1f2d9"),
    "rewards/": ("3 score", "#fff3bf"), "training/": ("4 advantages -> 5 update", "#ffd8cc"),
    "tracking/": ("6 log", "#e9d8fd"), "reporting/": ("6 report", "#e9d8fd"),
}

fig, ax = plt.subplots(figsize=(12, 12))
ax.set_xlim(0, 11.4)
ax.set_ylim(0, len(LAYERS) + 1.2)
ax.axis("off")
for row, layer in enumerate(LAYERS):
    y = len(LAYERS) - row
    width = 7.6 / len(layer)
    for i, (name, what) in enumerate(layer):
        x = 0.4 + i * width
        stage, colour = STAGES.get(name, ("", "#f1f3f5"))
        ax.add_patch(FancyBboxPatch((x, y - 0.38), width - 0.15, 0.76, boxstyle="round,pad=0.02", fc=colour,
                                    ec="#495057", lw=1))
        ax.text(x + 0.12, y + 0.1, name, fontsize=11, fontweight="bold", va="center")
        ax.text(x + 0.12, y - 0.18, what, fontsize=8.5, va="center", color="#343a40")
        if stage:
            ax.text(x + width - 0.3, y + 0.1, stage, fontsize=8.5, ha="right", va="center", color="#c92a2a",
                    fontweight="bold")
ax.text(0.4, len(LAYERS) + 0.85, "rlvr: each package imports only the ones below it (.importlinter, checked in CI)",
        fontsize=12, fontweight="bold")
PIPELINE = [("1 sample prompts", "curriculum/samplers.py"), ("2 generate", "rollout/ engines, episodes"),
            ("3 score", "rewards/ pool + tasks' verifiers"), ("4 advantages", "training/advantages.py"),
            ("5 update", "training/update.py"), ("6 log, checkpoint", "tracking/, training/checkpoint.py")]
ax.text(10.0, len(LAYERS) + 0.8, "one step (rollout/collect.py: 1-3)", fontsize=10, fontweight="bold",
        color="#c92a2a", ha="center")
top = len(LAYERS) - 0.2
for k, (stage, where) in enumerate(PIPELINE):
    y = top - k * 2.3
    ax.add_patch(FancyBboxPatch((8.75, y - 0.55), 2.5, 1.1, boxstyle="round,pad=0.02", fc="#fff5f5", ec="#c92a2a"))
    ax.text(10.0, y + 0.18, stage, fontsize=10, fontweight="bold", ha="center", va="center", color="#c92a2a")
    ax.text(10.0, y - 0.22, where, fontsize=7.5, ha="center", va="center")
    if k:
        ax.add_patch(FancyArrowPatch((10.0, y + 1.75), (10.0, y + 0.6), arrowstyle="-|>", mutation_scale=14,
                                     color="#c92a2a", lw=1.4))
ax.add_patch(FancyArrowPatch((8.75, top - 5 * 2.3), (8.75, top), connectionstyle="arc3,rad=-0.25", arrowstyle="-|>",
                             mutation_scale=12, color="#868e96", lw=1, ls="--"))
ax.text(8.45, top - 2.5 * 2.3, "statistics back\nto the sampler", fontsize=7.5, color="#495057", ha="right",
        va="center", rotation=90)
fig.tight_layout()
fig.savefig(Path(__file__).with_name("architecture.png"), dpi=110)
