"""Tool use on a real chat model without SFT: does GRPO alone teach SmolLM2-135M-Instruct to call a calculator?
(recipes/smollm2_tool_use.yaml, docs/results.md "Tool use on a real model")

    python -m benchmarks.real_tool_use samples [--problems 24] [--samples 8]          # what the base model writes
    python -m benchmarks.real_tool_use train --arm rl --seeds 0 1 2 [--output runs/real_tool_use]
    python -m benchmarks.real_tool_use train --arm demo --seeds 0 1 2
    python -m benchmarks.real_tool_use train --arm format --seeds 0 1 2
    python -m benchmarks.real_tool_use train --arm sft --seeds 0 1 2
    python -m benchmarks.real_tool_use summary [--output runs/real_tool_use] [--plot docs/img/real_tool_use.png]

Arms (each from the base model, the recipe otherwise unchanged):
- `rl`: the recipe: the tool described in the system prompt with one example call, the math verifier the only reward;
- `demo`: the example call shown as a conversation instead (a user question, the assistant's call, the result, the
  assistant's answer, then the question), still no SFT and the verifier the only reward: a prompt, no training;
- `format`: plus a reward of 0.5 for a well-formed call (`rlvr.rewards.shaping:tool_call_reward`, ToolRL's kind);
- `sft`: first SFT on 4 demonstrations (question, the call, the calculator's result, "a * b = c"; training problems
  the RL run draws last), 2 epochs at lr 1e-5 (two optimizer steps), then the recipe.

Every measure is computed here from the episodes' messages, apart from the reward and the environment's own metrics:
- well-formed call: an assistant turn holds <calculator>...</calculator> and no calculator reply is an error;
- call with the operands: some call's expression holds both of the question's numbers;
- exact accuracy: the last assistant turn's last boxed integer, else its last integer, is the product (the exact
  check of benchmarks/real_model.py: no expression evaluated, nothing of rlvr's verifiers used).
Per evaluation (held-out greedy episodes, eval_completions.jsonl) and per training step (the sampled episodes,
completions.jsonl). `samples` plays the base model's sampled episodes on held-out problems with the same measures and
writes them to OUTPUT/base_samples.jsonl.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import (
    ROOT,
    commit,
    first_last_steps,
    has_checkpoints,
    load_average,
    mean_sd,
    rlvr_command,
    run,
    run_minutes,
    sample_episodes,
    save_figure,
    summary_arguments,
    train_arguments,
    train_resumably,
)
from benchmarks.real_model import exact_correct
from rlvr.tracking.jsonl import read_jsonl

RECIPE = ROOT / "recipes" / "smollm2_tool_use.yaml"
CALL = re.compile(r"<calculator>(.*?)</calculator>", re.DOTALL)
OPERANDS = re.compile(r"What is (\d+) \* (\d+)\?")
FORMAT_REWARD = ("rewards.functions=[{function: task}, {function: 'rlvr.rewards.shaping:tool_call_reward', "
                 "weight: 0.5}]")
SFT_DEMOS = 4
SFT_SETTINGS = ["sft.epochs=2", "sft.lr=1e-5", "sft.batch_size=4", "sft.messages_column=messages"]


# ---------------------------------------------------------------------------------------------------- measures


def question_of(prompt) -> str:
    """The question text of a logged prompt (a string, or a conversation's last user message)."""
    if isinstance(prompt, list):
        return next(m["content"] for m in reversed(prompt) if m["role"] == "user")
    return prompt


def episode_measures(prompt, messages: list[dict], reference: str) -> dict[str, bool]:
    """The three measures of one episode from its messages (see the module docstring)."""
    found = OPERANDS.search(question_of(prompt))
    operands = set(found.groups()) if found else set()
    calls = [expr for m in messages if m["role"] == "assistant" for expr in CALL.findall(m["content"])]
    replies = [m["content"] for m in messages if m["role"] in ("tool", "user")]
    well_formed = bool(calls) and not any(r.startswith("Error") for r in replies)
    with_operands = any(operands and operands <= set(re.findall(r"\d+", expr)) for expr in calls)
    answer = next((m["content"] for m in reversed(messages) if m["role"] == "assistant"), "")
    return {"well_formed": well_formed, "operands": with_operands, "exact": exact_correct(answer, reference)}


def rates(rows: list[dict]) -> dict[str, float]:
    """Shares of episodes (rows with prompt, messages, reference) meeting each measure, plus the run's own verdict."""
    measured = [episode_measures(r["prompt"], r.get("messages") or [], r["reference"]) for r in rows]
    out = {key: sum(m[key] for m in measured) / len(measured) for key in ("well_formed", "operands", "exact")}
    out["verifier"] = sum(bool(r["correct"]) for r in rows) / len(rows)
    out["episodes"] = len(rows)
    return out


def eval_curve(run_dir: Path) -> list[dict]:
    """Per held-out evaluation: the step and the rates over its logged greedy episodes."""
    by_step: dict[int, dict[str, dict]] = {}
    for row in read_jsonl(run_dir / "eval_completions.jsonl"):
        by_step.setdefault(row["step"], {})[row["uid"]] = row
    return [{"step": step, **rates(list(rows.values()))} for step, rows in sorted(by_step.items())]


def train_curve(run_dir: Path) -> list[dict]:
    """Per training step: the rates over its sampled episodes (completions.jsonl, every group logged)."""
    by_step: dict[int, list[dict]] = {}
    for row in read_jsonl(run_dir / "completions.jsonl"):
        by_step.setdefault(row["step"], []).append(row)
    return [{"step": step, **rates(rows)} for step, rows in sorted(by_step.items())]


# ---------------------------------------------------------------------------------------------------- samples


def samples(args) -> None:
    """The base model's sampled episodes on held-out problems, with the recipe's prompt, sampling and environment."""
    episodes, temperature, seconds = sample_episodes(RECIPE, [f"model.name={args.model}"] if args.model else [],
                                                     args.problems, args.samples)
    rows = [{"prompt": p.prompt, "reference": p.answer, "messages": e.messages, "correct": e.success}
            for p, e in episodes]
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "base_samples.jsonl").open("w") as f:
        for row in rows:
            f.write(json.dumps({**row, **episode_measures(row["prompt"], row["messages"], row["reference"])}) + "\n")
    r = rates(rows)
    print(f"base model, {len(rows)} sampled episodes ({args.problems} held-out problems x {args.samples}, "
          f"temperature {temperature}) in {seconds:.0f} s: well-formed call {100 * r['well_formed']:.1f}%, "
          f"call with the operands {100 * r['operands']:.1f}%, exact {100 * r['exact']:.1f}%, verifier "
          f"{100 * r['verifier']:.1f}%; written to {out / 'base_samples.jsonl'}")
    mentions = sum("<calc" in m["content"] for row in rows for m in row["messages"] if m["role"] == "assistant")
    print(f"assistant turns that open a <calc... tag at all: {mentions}")


# ---------------------------------------------------------------------------------------------------- train


def write_demonstrations(path: Path, n: int) -> None:
    """`n` tool-use conversations on training problems the runs draw last (the file's training rows from the end)."""
    rows = [json.loads(line) for line in (ROOT / "recipes" / "data" / "chat_multiplication.jsonl").read_text()
            .splitlines()]
    train = rows[:-100]  # the recipe holds out the last 100 (eval_size)
    with path.open("w") as f:
        for row in train[-n:]:
            a, b = OPERANDS.search(row["prompt"]).groups()
            f.write(json.dumps({"messages": [
                {"role": "user", "content": row["prompt"]},
                {"role": "assistant", "content": f"<calculator>{a}*{b}</calculator>"},
                {"role": "tool", "content": row["answer"]},
                {"role": "assistant", "content": f"{a} * {b} = {row['answer']}"}]}) + "\n")


DEMO = [{"role": "user", "content": "What is 12 * 34?"}, {"role": "assistant", "content": "<calculator>12*34</calculator>"},
        {"role": "user", "content": "408"}, {"role": "assistant", "content": "12 * 34 = 408"}]


def write_demo_prompts(path: Path) -> None:
    """The recipe's problems as conversations that open with the example exchange (DEMO), then the question."""
    with path.open("w") as f:
        for line in (ROOT / "recipes" / "data" / "chat_multiplication.jsonl").read_text().splitlines():
            row = json.loads(line)
            f.write(json.dumps({"prompt": [*DEMO, {"role": "user", "content": row["prompt"]}],
                                "answer": row["answer"]}) + "\n")


def train(args) -> None:
    out = Path(args.output) / args.arm
    out.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        run_dir = out / f"seed{seed}"
        if (out / f"seed{seed}.json").is_file():
            print(f"{args.arm} seed {seed}: finished earlier, kept ({out / f'seed{seed}.json'})")
            continue
        settings = [f"seed={seed}", *(["steps=" + str(args.steps)] if args.steps else []), *args.set]
        load, t0, resumed = load_average(), time.perf_counter(), has_checkpoints(run_dir)
        sft_seconds = 0.0
        if args.arm == "demo":
            demo_prompts = out / "demo_prompts.jsonl"
            write_demo_prompts(demo_prompts)
            settings.append(f"data.tasks.0.args.path={demo_prompts}")
        elif args.arm == "format":
            settings.append(FORMAT_REWARD)
        elif args.arm == "sft":
            demos = out / f"seed{seed}-demonstrations.jsonl"
            write_demonstrations(demos, SFT_DEMOS)
            sft_dir = out / f"seed{seed}-sft"
            if not resumed:  # a resumed run's SFT model is the one it started from
                sft_seconds = run(rlvr_command("sft", str(RECIPE), f"seed={seed}", f"sft.data_file={demos}",
                                               f"sft.output_dir={sft_dir}",
                                               f"tracking.output_dir={out / f'seed{seed}-sftlog'}", *SFT_SETTINGS),
                                  out / f"seed{seed}-sft.log")
            settings.append(f"model.name={sft_dir}")
        seconds = train_resumably([str(RECIPE), *settings], run_dir, out / f"seed{seed}.log")
        result = {"arm": args.arm, "seed": seed, "commit": commit(), "resumed": resumed,
                  "wall_seconds": time.perf_counter() - t0,
                  "sft_seconds": sft_seconds, "rl_seconds": seconds, "load_before": load, "load_after": load_average(),
                  "eval": eval_curve(run_dir), "train": train_curve(run_dir)}
        (out / f"seed{seed}.json").write_text(json.dumps(result, indent=2))
        print(f"{args.arm} seed {seed}: {result['wall_seconds'] / 60:.1f} min (load {load} -> {load_average()})")
        for p in result["eval"]:
            print(f"  step {p['step']:>3}: well-formed {100 * p['well_formed']:5.1f}%  operands "
                  f"{100 * p['operands']:5.1f}%  exact {100 * p['exact']:5.1f}%  verifier {100 * p['verifier']:5.1f}%",
                  flush=True)


# ---------------------------------------------------------------------------------------------------- summary


def load_results(output: Path) -> dict[str, list[dict]]:
    arms: dict[str, list[dict]] = {}
    for path in sorted(output.glob("*/seed*.json")):
        result = json.loads(path.read_text())
        arms.setdefault(result["arm"], []).append(result)
    if not arms:
        raise SystemExit(f"no results under {output} (run `train` first)")
    return arms


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def summary(args) -> None:
    arms = load_results(Path(args.output))
    print("| arm | seed | held-out greedy: well-formed call, base -> end | call with the operands | exact accuracy "
          "(verifier) | sampled training episodes: well-formed call, step 1 -> last 5 steps | exact | minutes |")
    print("|---|---|---|---|---|---|---|---|")
    for arm, results in arms.items():
        for r in sorted(results, key=lambda r: r["seed"]):
            first, last = r["eval"][0], r["eval"][-1]
            sampled = {key: (r["train"][0][key], statistics.mean(p[key] for p in first_last_steps(r["train"], 5)[1]))
                       for key in ("well_formed", "exact")}
            print(f"| {arm} | {r['seed']} | {pct(first['well_formed'])} -> {pct(last['well_formed'])} | "
                  f"{pct(first['operands'])} -> {pct(last['operands'])} | {pct(first['exact'])} -> {pct(last['exact'])} "
                  f"({pct(first['verifier'])} -> {pct(last['verifier'])}) | {pct(sampled['well_formed'][0])} -> "
                  f"{pct(sampled['well_formed'][1])} | {pct(sampled['exact'][0])} -> {pct(sampled['exact'][1])} | "
                  f"{run_minutes(r)} |")
        means = {key: mean_sd([r["eval"][-1][key] for r in results], pct) for key in ("well_formed", "operands",
                                                                                        "exact", "verifier")}
        late = {key: mean_sd([statistics.mean(p[key] for p in first_last_steps(r["train"], 5)[1]) for r in results], pct)
                for key in ("well_formed", "exact")}
        print(f"| {arm} | mean ± sd ({len(results)} seeds) | {means['well_formed']} | {means['operands']} | "
              f"{means['exact']} ({means['verifier']}) | {late['well_formed']} | {late['exact']} | |")
    if args.plot:
        plot(arms, Path(args.plot))


def plot(arms: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = (("well_formed", "well-formed call"), ("operands", "call with the operands"),
            ("exact", "exact accuracy"))
    fig, axes = plt.subplots(1, 4, figsize=(17, 4))
    colors = {"rl": "tab:blue", "demo": "tab:purple", "format": "tab:orange", "sft": "tab:green"}
    for arm, results in arms.items():
        for r in results:
            for ax, (key, _) in zip(axes, keys):
                ax.plot([p["step"] for p in r["eval"]], [100 * p[key] for p in r["eval"]], color=colors.get(arm),
                        marker="o", alpha=0.8, label=f"{arm}" if r is results[0] else None)
            steps = [p["step"] for p in r["train"]]
            axes[3].plot(steps, [100 * p["well_formed"] for p in r["train"]], color=colors.get(arm), alpha=0.6,
                         label=f"{arm}: well-formed call" if r is results[0] else None)
            axes[3].plot(steps, [100 * p["exact"] for p in r["train"]], color=colors.get(arm), alpha=0.6,
                         linestyle="--", label=f"{arm}: exact" if r is results[0] else None)
    for ax, (_, title) in zip(axes, keys):
        ax.set_title(f"held-out greedy: {title}")
        ax.set_xlabel("GRPO step")
    axes[3].set_title("sampled training episodes")
    axes[3].set_xlabel("GRPO step")
    for ax in axes:
        ax.set_ylim(-3, 103)
        ax.set_ylabel("%")
    save_figure(fig, path, title="SmolLM2-135M-Instruct, 3-digit multiplication with a calculator (one line per seed)",
                panels=axes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("samples")
    s.add_argument("--problems", type=int, default=24)
    s.add_argument("--samples", type=int, default=8)
    s.add_argument("--output", default="runs/real_tool_use")
    s.add_argument("--model", default=None, help="another model than the recipe's (an SFT directory)")
    train_arguments(sub, ["rl", "demo", "format", "sft"], "runs/real_tool_use")
    summary_arguments(sub, "runs/real_tool_use")
    args = parser.parse_args()
    {"samples": samples, "train": train, "summary": summary}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
