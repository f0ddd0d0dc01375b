"""Tool use on a CPU: does a tiny model learn to use a calculator, and does RL help? (docs/results.md)

For each seed, two arms with the same model, demonstrations count, SFT epochs and RL steps:
- tools: SFT on conversations [user 'a*b=', assistant '<calculator>a*b</calculator>', tool result, assistant
  answer], then GRPO on episodes in the `tools` environment (recipes/tool_use.yaml);
- no tools: SFT on pairs ('a*b=', answer), then GRPO on single completions.
Held-out greedy accuracy and the rate of well-formed tool calls (an episode that called the calculator and every
call parsed and computed) before and after RL. Writes summary.json, a table and tool_use.png under --out.

    python benchmarks/tool_use.py --seeds 0 1 2
    python benchmarks/tool_use.py --arms tools --out runs/tool_use_gigpo algorithm.turn_credit=gigpo  # overrides
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import time
from pathlib import Path

import torch

from rlvr.config import RunConfig, apply_overrides, build_config, read_yaml
from rlvr.envs import make_tasks
from rlvr.envs.base import verify
from rlvr.models.loading import load_model, load_tokenizer
from rlvr.models.prompts import PromptEncoder
from rlvr.rollout import SamplingParams, make_engine
from rlvr.rollout.episodes import EpisodeRunner
from rlvr.training.sft import run_sft
from rlvr.training.trainer import Trainer

RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "tool_use.yaml"


def arm_config(base: dict, arm: str, seed: int, out: Path, steps: int | None) -> dict:
    data = copy.deepcopy(base)
    data["seed"] = seed
    if steps is not None:
        data["steps"] = steps
    if arm == "no_tools":
        del data["data"]["tasks"][0]["env"]
        data["rollout"]["max_new_tokens"] = 8  # the answer (at most 6 digits) and the end token
    data["tracking"]["output_dir"] = str(out / "rl")
    data["sft"]["output_dir"] = str(out / "sft")
    return data


def write_demonstrations(cfg: RunConfig, arm: str, path: Path) -> None:
    """Tool-use conversations or plain pairs for the same problems (the task's train stream at seed + 1)."""
    task = make_tasks(cfg.data.tasks, cfg.seed + cfg.sft.seed_offset)[0]
    rows = []
    for i in range(cfg.sft.num_examples):
        p = task.problem("train", i)
        if arm == "tools":
            rows.append({"messages": [{"role": "user", "content": p.prompt},
                                      {"role": "assistant", "content": f"<calculator>{p.prompt.rstrip('=')}</calculator>"},
                                      {"role": "tool", "content": p.answer},
                                      {"role": "assistant", "content": p.answer}]})
        else:
            rows.append({"prompt": p.prompt, "completion": p.answer})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@torch.no_grad()
def held_out(cfg: RunConfig, model_dir: str) -> dict[str, float]:
    """Greedy accuracy and well-formed tool-call rate over the held-out problems."""
    tokenizer = load_tokenizer(model_dir)
    model = load_model(cfg.model, name=model_dir).eval()
    task = make_tasks(cfg.data.tasks, cfg.seed)[0]
    encode = PromptEncoder(tokenizer, cfg.model.chat_template, cfg.data.system_prompt, cfg.data.max_prompt_tokens)
    runner = EpisodeRunner(make_engine("hf", model, tokenizer, 256), encode)
    work = [(task, task.problem("eval", i)) for i in range(cfg.eval.num_problems)]
    _, groups = runner.generate(work, SamplingParams(n=1, greedy=True, max_new_tokens=cfg.rollout.max_new_tokens))
    correct, well_formed, turns = 0, 0, 0
    for (t, problem), (c,) in zip(work, groups):
        if c.fields:  # an episode: its environment's verdict and tool statistics
            m = c.fields["episode_metrics"]
            correct += bool(c.fields["episode_success"])
            well_formed += m["tool_calls"] > 0 and m["tool_errors"] == 0
            turns += m["turns"]
        else:
            correct += verify(t, problem, c.text) >= 1.0
            turns += 1
    n = len(work)
    return {"accuracy": correct / n, "well_formed_tool_calls": well_formed / n if groups[0][0].fields else None,
            "turns": turns / n}


def run_arm(base: dict, arm: str, seed: int, root: Path, steps: int | None) -> dict:
    out = root / f"{arm}-seed{seed}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    start = time.perf_counter()
    data = arm_config(base, arm, seed, out, steps)
    cfg = build_config(data, str(RECIPE))
    demos = out / "demonstrations.jsonl"
    write_demonstrations(cfg, arm, demos)
    data["sft"].update({"data_file": str(demos), "messages_column": "messages" if arm == "tools" else None})
    cfg = build_config(data, str(RECIPE))
    sft_dir = run_sft(cfg)
    before = held_out(cfg, str(sft_dir))
    data["model"]["name"] = str(sft_dir)
    rl_cfg = build_config(data, str(RECIPE))
    Trainer(rl_cfg).fit()
    final = sorted((out / "rl" / "checkpoints").glob("step-*"))[-1]
    after = held_out(rl_cfg, str(final))
    row = {"arm": arm, "seed": seed, "before": before, "after": after, "rl_steps": rl_cfg.steps,
           "seconds": round(time.perf_counter() - start, 1)}
    print(json.dumps(row), flush=True)
    return row


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def table(rows: list[dict]) -> str:
    lines = ["| arm | seed | accuracy after SFT | after RL | well-formed tool calls after SFT | after RL | "
             "turns after RL | seconds |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b, a = r["before"], r["after"]
        lines.append(f"| {r['arm']} | {r['seed']} | {pct(b['accuracy'])} | {pct(a['accuracy'])} | "
                     f"{pct(b['well_formed_tool_calls'])} | {pct(a['well_formed_tool_calls'])} | {a['turns']:.2f} | "
                     f"{r['seconds']} |")
    for arm in dict.fromkeys(r["arm"] for r in rows):
        mine = [r for r in rows if r["arm"] == arm]

        def mean(stage: str, key: str, mine: list[dict] = mine) -> float | None:
            return None if mine[0][stage][key] is None else sum(r[stage][key] for r in mine) / len(mine)

        lines.append(f"| {arm} | mean | {pct(mean('before', 'accuracy'))} | {pct(mean('after', 'accuracy'))} | "
                     f"{pct(mean('before', 'well_formed_tool_calls'))} | {pct(mean('after', 'well_formed_tool_calls'))}"
                     f" | {mean('after', 'turns'):.2f} | |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    arms = list(dict.fromkeys(r["arm"] for r in rows))
    for ax, key, title in ((axes[0], "accuracy", "held-out accuracy (greedy)"),
                           (axes[1], "well_formed_tool_calls", "well-formed tool calls")):
        for i, arm in enumerate(arms):
            mine = [r for r in rows if r["arm"] == arm]
            if mine[0]["before"][key] is None:
                ax.text(i * 3 + 0.5, 2, "n/a", ha="center")
                continue
            for j, stage in enumerate(("before", "after")):
                values = [100 * r[stage][key] for r in mine]
                x = i * 3 + j
                ax.bar(x, sum(values) / len(values), color=("#bbbbbb", "#3a7bd5")[j],
                       label=("after SFT", "after RL")[j] if i == 0 else None)
                ax.scatter([x] * len(values), values, color="black", s=12, zorder=3)
        ax.set_xticks([i * 3 + 0.5 for i in range(len(arms))], [a.replace("_", " ") for a in arms])
        ax.set_xlim(-0.8, 3 * len(arms) - 1.2)
        ax.set_ylabel("%")
        ax.set_ylim(0, 100)
        ax.set_title(title)
    axes[0].legend()
    fig.suptitle(f"3-digit multiplication, tiny model, {rows[0]['rl_steps']} GRPO steps (bars: mean, dots: seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", default=["tools", "no_tools"], choices=["tools", "no_tools"])
    parser.add_argument("--steps", type=int, default=None, help="RL steps (default: the recipe's)")
    parser.add_argument("--out", default="runs/tool_use_bench")
    parser.add_argument("overrides", nargs="*", help="recipe overrides for both arms, e.g. algorithm.turn_credit=gigpo")
    args = parser.parse_args()
    root = Path(args.out)
    base = apply_overrides(read_yaml(RECIPE), args.overrides)
    rows = [run_arm(base, arm, seed, root, args.steps) for seed in args.seeds for arm in args.arms]
    (root / "summary.json").write_text(json.dumps(rows, indent=2))
    plot(rows, root / "tool_use.png")
    print(table(rows))
    print(f"plot: {root / 'tool_use.png'}")


if __name__ == "__main__":
    main()
