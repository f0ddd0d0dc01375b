"""Feedback a policy learns to use: SmolLM2-135M-Instruct plays games whose replies carry the information
(guess-the-number's "higher"/"lower", FrozenLake's grid after each move), trained by GRPO with the episode reward on
every token against GiGPO's turn-level credit (docs/results.md, "Feedback a policy learns to use").

    python -m benchmarks.real_games samples --game guess_number [--problems 16] [--samples 8]
    python -m benchmarks.real_games train --game guess_number --credits episode gigpo --seeds 0 1 2
    python -m benchmarks.real_games train --game guess_number --credits episode --seeds 0 \
        --recipe recipes/smollm2_guess_number_openenv.yaml --output runs/real_games_openenv
    python -m benchmarks.real_games train --game guess_number --credits episode --seeds 0 1 2 \
        --recipe recipes/smollm2_guess_number_verifiers.yaml --output runs/real_games_verifiers
    python -m benchmarks.real_games summary --game guess_number [--plot docs/img/real_guess_number.png]
    python -m benchmarks.real_games baselines --game guess_number     # the baselines the summary prints
    python -m benchmarks.real_games compare --game guess_number --runs openenv=runs/real_games_openenv \
        verifiers=runs/real_games_verifiers [--plot docs/img/real_guess_number_environments.png]

`train` runs `rlvr train recipes/smollm2_<game>.yaml seed=S` (and `algorithm.turn_credit=gigpo` for gigpo), seed
by seed, and reads, per held-out evaluation (every 10 steps, step 0 the base model): success within the turn budget
over the sampled games (eval/avg@2) and the greedy ones (eval/accuracy), the mean turns of the successful sampled
games, and whether later turns use the feedback: for guess-the-number the share of guesses after the first that are
consistent with every earlier reply (eval/episode/consistent) and the share that repeat an earlier guess; for
FrozenLake the share of moves that bring the player closer to the goal (eval/episode/closer). The greedy games
(eval_completions.jsonl) are also replayed here by a check written apart from the environment (the secret named by
some turn's first integer; the walk of each turn's first move word over the map), which must agree with the run's
own verdicts. `compare` sets the same game's runs through different environment paths (native, OpenEnv,
verifiers: each a `train --output`) side by side, with where their training steps spent their time.
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
    has_checkpoints,
    load_average,
    mean_sd,
    run_minutes,
    sample_episodes,
    save_figure,
    summary_arguments,
    time_figures,
    train_resumably,
)
from rlvr.tracking.jsonl import read_jsonl

GAMES = {
    "guess_number": {"turns": "eval/episode/guesses_to_success", "feedback": "eval/episode/consistent",
                     "extra": "eval/episode/repeated", "feedback_name": "guesses consistent with every reply",
                     "extra_name": "guesses repeated"},
    "frozen_lake": {"turns": "eval/episode/moves_to_success", "feedback": "eval/episode/closer",
                    "extra": "eval/episode/fell", "feedback_name": "moves closer to the goal",
                    "extra_name": "walks into a hole"},
}
CREDITS = {"episode": [], "gigpo": ["algorithm.turn_credit=gigpo"]}


def recipe(game: str) -> Path:
    return ROOT / "recipes" / f"smollm2_{game}.yaml"


# ---------------------------------------------------------------------------------------------------- exact check


def guess_solved(messages: list[dict], secret: str) -> bool:
    """Some assistant turn's first integer is the secret (the game's rule, read apart from its environment)."""
    for m in messages:
        if m["role"] == "assistant":
            found = re.search(r"-?\d+", m["content"])
            if found and found.group() == str(secret).strip():
                return True
    return False


def lake_solved(messages: list[dict], lake: str) -> bool:
    """Walking each assistant turn's first move word over the map reaches G before any hole (off-grid moves stay)."""
    rows = lake.split("/")
    r, c = next((i, row.index("S")) for i, row in enumerate(rows) if "S" in row)
    steps = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
    for m in messages:
        if m["role"] != "assistant":
            continue
        found = re.search(r"\b(up|down|left|right)\b", m["content"], re.IGNORECASE)
        if not found:
            continue
        dr, dc = steps[found.group().lower()]
        if 0 <= r + dr < len(rows) and 0 <= c + dc < len(rows[0]):
            r, c = r + dr, c + dc
        if rows[r][c] in "HG":
            return rows[r][c] == "G"
    return False


SOLVED = {"guess_number": guess_solved, "frozen_lake": lake_solved}


def guess_directions(messages: list[dict]) -> dict[str, list[bool]]:
    """For each reply "higher" / "lower" followed by another guess: whether that guess moved the way the reply said
    (above / below the guess it answered). A policy blind to the replies that counts upward follows every "higher"
    and no "lower"; the two shares apart tell it from one that reads them."""
    out: dict[str, list[bool]] = {"higher": [], "lower": []}
    last: int | None = None
    reply: str | None = None
    for m in messages:
        if m["role"] == "assistant":
            found = re.search(r"-?\d+", m["content"])
            guess = int(found.group()) if found else None
            if guess is not None and last is not None and reply in out:
                out[reply].append(guess > last if reply == "higher" else guess < last)
            last, reply = (guess, None) if guess is not None else (last, None)
        else:
            reply = m["content"].strip().lower()
    return out


def greedy_check(run_dir: Path, game: str) -> dict[int, dict[str, float]]:
    """Per evaluation step: the exact check's success over the greedy games, its disagreements with the run, and for
    guess-the-number the shares of guesses that move the way a "higher" / "lower" reply said (`guess_directions`)."""
    by_step: dict[int, dict[str, dict]] = {}
    for row in read_jsonl(run_dir / "eval_completions.jsonl"):
        by_step.setdefault(row["step"], {})[row["uid"]] = row
    out = {}
    for step, rows in by_step.items():
        solved = [SOLVED[game](r.get("messages") or [], r["reference"]) for r in rows.values()]
        out[step] = {"exact": sum(solved) / len(solved),
                     "disagree": sum(s != bool(r["correct"]) for s, r in zip(solved, rows.values()))}
        if game == "guess_number":
            moves = [guess_directions(r.get("messages") or []) for r in rows.values()]
            for reply in ("higher", "lower"):
                followed = [ok for m in moves for ok in m[reply]]
                out[step][f"follows_{reply}"] = sum(followed) / len(followed) if followed else None
    return out


def sampled_directions(run_dir: Path, bucket: int = 10) -> list[dict]:
    """Guess-the-number's `guess_directions` over the sampled training games (completions.jsonl), pooled per `bucket`
    steps: the shares of guesses that move the way a "higher" / "lower" reply said, and how many replies each."""
    pooled: dict[int, dict[str, list[bool]]] = {}
    for row in read_jsonl(run_dir / "completions.jsonl"):
        moves = guess_directions(row.get("messages") or [])
        into = pooled.setdefault((row["step"] - 1) // bucket, {"higher": [], "lower": []})
        for reply, followed in moves.items():
            into[reply] += followed
    return [{"steps": f"{b * bucket + 1}-{(b + 1) * bucket}", "step": (b + 0.5) * bucket,
             **{f"follows_{reply}": sum(v) / len(v) if v else None for reply, v in pooled[b].items()},
             **{f"{reply}_replies": len(v) for reply, v in pooled[b].items()}} for b in sorted(pooled)]


def eval_curve(run_dir: Path, game: str) -> list[dict]:
    keys = GAMES[game]
    check = greedy_check(run_dir, game)
    curve = []
    for row in read_jsonl(run_dir / "metrics.jsonl"):
        if "eval/accuracy" not in row:
            continue
        curve.append({"step": row["step"], "sampled": row.get("eval/avg@2"), "greedy": row["eval/accuracy"],
                      "turns": row.get(keys["turns"]), "feedback": row.get(keys["feedback"]),
                      "extra": row.get(keys["extra"]), "turns_all": row.get("eval/turns_mean"),
                      **check.get(row["step"], {})})
    return curve


# ---------------------------------------------------------------------------------------------------- commands


def samples(args) -> None:
    """The base model's sampled games on held-out problems, with the recipe's prompt, sampling and environment."""
    episodes, _, seconds = sample_episodes(recipe(args.game), args.set, args.problems, args.samples)
    metrics: dict[str, list[float]] = {}
    for _, e in episodes:
        for name, value in e.fields["episode_metrics"].items():
            if value == value:  # NaN: outside the metric's population
                metrics.setdefault(name, []).append(value)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    with (out / f"{args.game}_base_samples.jsonl").open("w") as f:
        for p, e in episodes:
            f.write(json.dumps({"prompt": p.prompt, "reference": p.answer, "messages": e.messages,
                                "success": e.success, "metrics": e.fields["episode_metrics"]}) + "\n")
    print(f"base model, {len(episodes)} sampled games in {seconds:.0f} s: success "
          f"{100 * statistics.mean(e.success for _, e in episodes):.1f}%")
    for name, values in metrics.items():
        print(f"  {name}: {statistics.mean(values):.3f} over {len(values)} games")
    for p, e in episodes[: 3 * args.samples : args.samples]:
        print(f"--- secret/map {p.answer}: " + " | ".join(m["content"].replace("\n", " ")[:40] for m in e.messages))


def train(args) -> None:
    for seed in args.seeds:
        for credit in args.credits:
            out = Path(args.output) / args.game / credit
            out.mkdir(parents=True, exist_ok=True)
            run_dir = out / f"seed{seed}"
            if (out / f"seed{seed}.json").is_file():
                print(f"{args.game} {credit} seed {seed}: finished earlier, kept ({out / f'seed{seed}.json'})")
                continue
            load, t0, resumed = load_average(), time.perf_counter(), has_checkpoints(run_dir)
            train_resumably([args.recipe or str(recipe(args.game)), f"seed={seed}", *CREDITS[credit],
                             *([f"steps={args.steps}"] if args.steps else []), *args.set], run_dir,
                            out / f"seed{seed}.log")
            result = {"game": args.game, "credit": credit, "seed": seed, "commit": commit(), "resumed": resumed,
                      "wall_seconds": time.perf_counter() - t0, "load_before": load, "load_after": load_average(),
                      "eval": eval_curve(run_dir, args.game)}
            (out / f"seed{seed}.json").write_text(json.dumps(result, indent=2))
            print(f"{args.game} {credit} seed {seed}: {result['wall_seconds'] / 60:.1f} min (load {load} -> "
                  f"{load_average()})")
            for p in result["eval"]:
                print(f"  step {p['step']:>3}: success sampled {fmt(p['sampled'])} greedy {fmt(p['greedy'])} (exact "
                      f"{fmt(p.get('exact'))}, {p.get('disagree')} disagree)  turns to success {num(p['turns'])}  "
                      f"{GAMES[args.game]['feedback_name']} {fmt(p['feedback'])}", flush=True)


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def end(curve: list[dict], key: str) -> float | None:
    """The mean of the last two evaluations (steps 20 and 30 for the recipes): less noisy than the last alone."""
    values = [p[key] for p in curve[-2:] if p.get(key) is not None]
    return statistics.mean(values) if values else None


def summary(args) -> None:
    root = Path(args.output) / args.game
    results = [json.loads(p.read_text()) for p in sorted(root.glob("*/seed*.json"))]
    if not results:
        raise SystemExit(f"no results under {root} (run `train` first)")
    for r in results:  # the measures of this checkout, read again from the run's own files
        run_dir = root / r["credit"] / f"seed{r['seed']}"
        r["eval"] = eval_curve(run_dir, args.game)
        r["sampled_directions"] = sampled_directions(run_dir) if args.game == "guess_number" else []
    by_credit = {credit: sorted((r for r in results if r["credit"] == credit), key=lambda r: r["seed"])
                 for credit in CREDITS if any(r["credit"] == credit for r in results)}
    keys = GAMES[args.game]
    columns = [("sampled", "success, sampled"), ("greedy", "success, greedy"), ("exact", "greedy, by the exact check"),
               ("turns", "turns to success"), ("feedback", keys["feedback_name"]), ("extra", keys["extra_name"])]
    if args.game == "guess_number":
        columns += [("follows_higher", 'greedy: guess above after "higher"'),
                    ("follows_lower", 'greedy: guess below after "lower"')]
    show = {key: num if key == "turns" else fmt for key, _ in columns}
    print("Base -> end, end being the mean of the last two held-out evaluations (steps 20 and 30).\n")
    print("| credit | seed | " + " | ".join(name for _, name in columns) + " | minutes |")
    print("|---|---|" + "---|" * len(columns) + "---|")
    for credit, mine in by_credit.items():
        for r in mine:
            c = r["eval"]
            print(f"| {credit} | {r['seed']} | " + " | ".join(f"{show[k](c[0].get(k))} -> {show[k](end(c, k))}"
                                                           for k, _ in columns) + f" | {run_minutes(r)} |")
        ends = [mean_sd([end(r["eval"], k) for r in mine], show[k]) for k, _ in columns]
        print(f"| {credit} | mean ± sd ({len(mine)} seeds) | " + " | ".join(ends) + " | |")
    disagreements = sum(p.get("disagree", 0) for r in results for p in r["eval"])
    print(f"greedy games where the exact check and the run's verdict disagree: {disagreements}")
    print_step_groups(root, results)
    print_baselines(args.game)
    if args.game == "guess_number":
        print_sampled_directions(by_credit)
    if args.plot:
        plot(results, args.game, Path(args.plot), args.title)


def step_groups(run_dir: Path) -> dict[str, float | None]:
    """GiGPO's step groups over a run's training steps (the credit/* metrics each gigpo step logs): the mean group
    size, the mean share of groups of one turn, and the largest group seen; None where the run logged none (an
    episode-credit run, or one made before the metrics existed)."""
    rows = [r for r in read_jsonl(run_dir / "metrics.jsonl") if "credit/step_group_size_mean" in r]
    if not rows:
        return {"size": None, "singletons": None, "largest": None}
    return {"size": statistics.mean(r["credit/step_group_size_mean"] for r in rows),
            "singletons": statistics.mean(r["credit/singleton_step_groups"] for r in rows),
            "largest": max(r["credit/step_group_size_max"] for r in rows)}


def print_step_groups(root: Path, runs: list[dict]) -> None:
    """The step groups of the gigpo runs, per seed and as mean ± sd."""
    mine = [r for r in runs if r["credit"] == "gigpo"]
    if not mine:
        return
    groups = [step_groups(root / "gigpo" / f"seed{r['seed']}") for r in mine]
    print("\nGiGPO's step groups over the training steps (turns of a group that start from one environment state):\n")
    print("| seed | mean step-group size | groups of one turn | largest group |")
    print("|---|---|---|---|")
    for r, g in zip(mine, groups):
        largest = "-" if g["largest"] is None else f"{g['largest']:.0f}"
        print(f"| {r['seed']} | {num(g['size'])} | {fmt(g['singletons'])} | {largest} |")
    print(f"| mean ± sd ({len(mine)} seeds) | {mean_sd([g['size'] for g in groups], num)} | "
          f"{mean_sd([g['singletons'] for g in groups], fmt)} | |")


def print_baselines(game: str) -> None:
    """The simple baselines on the same held-out games as the table above (rlvr.evaluation.baselines)."""
    from rlvr.evaluation import baselines as b

    if game == "frozen_lake":
        from rlvr.config import load_config

        (task,) = load_config(recipe(game)).data.tasks
        turns = task.env.max_turns
        print(f"\nBaselines on the same {task.args['eval_size']} held-out maps (success within {turns} moves): a "
              f"uniformly random move each turn: {float(b.frozen_lake_random_walk(task.args, turns)):.1%} (exactly); "
              f"the shortest safe walk: {float(b.frozen_lake_shortest(task.args, turns)):.1%}")
        return
    best = b.best_blind_order(b.guess_number_secrets())
    print(f"\nBaselines on the same 40 held-out secrets (success within 5 guesses): the best blind guesses {best}: "
          f"{float(b.guess_number_success(b.blind_guesses(best))):.1%}; counting 1-5: "
          f"{float(b.guess_number_success(b.blind_guesses([1, 2, 3, 4, 5]))):.1%}; binary search: "
          f"{float(b.guess_number_success(b.binary_search)):.1%}")


def print_sampled_directions(by_credit: dict[str, list[dict]]) -> None:
    """Whether the sampled training games read the replies: first 10 steps -> last 10 (`sampled_directions`)."""
    print("\nSampled training games, steps 1-10 -> 21-30 (replies counted in brackets):\n")
    print('| credit | seed | next guess above after "higher" | next guess below after "lower" |')
    print("|---|---|---|---|")
    replies = ("higher", "lower")
    for credit, mine in by_credit.items():
        for r in mine:
            first, last = r["sampled_directions"][0], r["sampled_directions"][-1]
            print(f"| {credit} | {r['seed']} | " + " | ".join(
                f"{fmt(first[f'follows_{reply}'])} ({first[f'{reply}_replies']}) -> {fmt(last[f'follows_{reply}'])} "
                f"({last[f'{reply}_replies']})" for reply in replies) + " |")

        def shares(at: int, reply: str, mine: list[dict] = mine) -> str:
            return mean_sd([r["sampled_directions"][at][f"follows_{reply}"] for r in mine], fmt)

        print(f"| {credit} | mean ± sd ({len(mine)} seeds) | " +
              " | ".join(f"{shares(0, reply)} -> {shares(-1, reply)}" for reply in replies) + " |")


def load_runs(output: Path, game: str, credit: str) -> list[dict]:
    """A `train --output`'s finished seeds of one game and credit, their measures read again from the runs' files."""
    runs = []
    for path in sorted((output / game / credit).glob("seed*.json")):
        r = json.loads(path.read_text())
        run_dir = path.with_suffix("")
        runs.append(r | {"eval": eval_curve(run_dir, game), "time": time_figures(run_dir)})
    return runs


def compare(args) -> None:
    """The same game trained through different environment paths (each `LABEL=DIR`, a `train --output`): held-out
    success base -> end as mean ± sd over seeds, the exact check's disagreements, and where the training steps'
    time went (`time_figures`)."""
    by_label = {}
    for spec in args.runs:
        label, sep, folder = spec.partition("=")
        if not sep:
            raise SystemExit(f"--runs takes LABEL=DIR, got {spec!r}")
        by_label[label] = load_runs(Path(folder), args.game, args.credit)
        if not by_label[label]:
            raise SystemExit(f"no finished seeds under {Path(folder) / args.game / args.credit} (run `train` first)")
    pct = lambda v: f"{100 * v:.2f}%"  # noqa: E731
    print(f"{args.game}, {args.credit} credit; base -> end, end being the mean of the last two held-out evaluations\n")
    print("| environment | seeds | success, sampled | success, greedy | greedy games the exact check disputes | "
          "s per training step | environment's share of a step | latency of a model call (ms) | calls per engine batch | "
          "generation outside the engine | minutes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, runs in by_label.items():
        seeds = ", ".join(str(r["seed"]) for r in runs)
        cells = [f"{mean_sd([r['eval'][0].get(k) for r in runs], fmt)} -> {mean_sd([end(r['eval'], k) for r in runs], fmt)}"
                 for k in ("sampled", "greedy")]
        disputed = sum(p.get("disagree", 0) for r in runs for p in r["eval"])
        times = [r["time"] for r in runs]
        cells += [str(disputed), mean_sd([t.get("step_s") for t in times], lambda v: f"{v:.1f}"),
                  mean_sd([t.get("env_share") for t in times], pct),
                  mean_sd([t.get("call_ms") for t in times], lambda v: f"{v:.0f}"),
                  mean_sd([t.get("calls_per_batch") for t in times], lambda v: f"{v:.1f}"),
                  mean_sd([t.get("outside_engine_share") for t in times], pct),
                  mean_sd([r["wall_seconds"] / 60 for r in runs], lambda v: f"{v:.0f}")]
        print(f"| {label} | {seeds} | " + " | ".join(cells) + " |")
        for r in runs:
            print(f"    seed {r['seed']}: sampled " + " / ".join(fmt(p.get("sampled")) for p in r["eval"]) + "; greedy "
                  + " / ".join(fmt(p.get("greedy")) for p in r["eval"]) + " (steps "
                  + ", ".join(str(p["step"]) for p in r["eval"]) + f"); commit {r['commit']}")
    print_baselines(args.game)
    if args.plot:
        plot_paths(by_label, args.game, Path(args.plot))


def plot_paths(by_label: dict[str, list[dict]], game: str, path: Path) -> None:
    """Held-out success (sampled, greedy) against steps per environment path: seeds thin, their mean thick."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for (label, runs), color in zip(by_label.items(), ("tab:blue", "tab:green", "tab:purple", "tab:red")):
        for ax, key in zip(axes, ("sampled", "greedy")):
            for r in runs:
                ax.plot([p["step"] for p in r["eval"]], [100 * p[key] for p in r["eval"]], color=color, alpha=0.3)
            steps = sorted({p["step"] for r in runs for p in r["eval"]})
            ax.plot(steps, [statistics.mean(100 * p[key] for r in runs for p in r["eval"] if p["step"] == s)
                            for s in steps], color=color, marker="o", linewidth=2,
                    label=f"{label}, mean of {len(runs)} seeds")
    if game == "guess_number":
        from rlvr.evaluation import baselines as b

        best = float(b.guess_number_success(b.blind_guesses(b.best_blind_order(b.guess_number_secrets()))))
        for ax in axes:
            ax.axhline(100 * best, color="gray", linestyle="--", label=f"best blind five guesses ({best:.0%})")
    for ax, key in zip(axes, ("sampled", "greedy")):
        ax.set_title(f"held-out success within the turn budget ({key} games)")
        ax.set_xlabel("GRPO step")
        ax.set_ylabel("%")
    save_figure(fig, path, title=f"SmolLM2-135M-Instruct, {game.replace('_', ' ')}: one game through "
                f"{', '.join(by_label)} (thin: seeds)", panels=axes)


def plot(results: list[dict], game: str, path: Path, subtitle: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = GAMES[game]
    panels = [(key, title, scale) for key, title, scale in (
        ("sampled", "success within the turn budget\n(sampled held-out games)", 100),
        ("greedy", "success within the turn budget\n(greedy held-out games)", 100),
        ("turns", "turns to success", 1), ("feedback", keys["feedback_name"], 100))
        if any(p.get(key) is not None for r in results for p in r["eval"])]  # OpenEnv's game logs no turns, feedback
    extra = game == "guess_number"
    fig, axes = plt.subplots(1, len(panels) + extra, figsize=(4.5 * (len(panels) + extra), 4))
    colors = {"episode": "tab:blue", "gigpo": "tab:orange"}
    for credit in dict.fromkeys(r["credit"] for r in results):
        mine = [r for r in results if r["credit"] == credit]
        for ax, (key, title, scale) in zip(axes, panels):
            for r in mine:
                points = [(p["step"], scale * p[key]) for p in r["eval"] if p.get(key) is not None]
                ax.plot(*zip(*points), color=colors[credit], alpha=0.35, linewidth=1)
            values = {s: [scale * p[key] for r in mine for p in r["eval"] if p["step"] == s and p.get(key) is not None]
                      for s in sorted({p["step"] for r in mine for p in r["eval"]})}
            steps = [s for s, v in values.items() if v]  # an environment without the metric (OpenEnv's game): none
            ax.plot(steps, [statistics.mean(values[s]) for s in steps], color=colors[credit], marker="o", linewidth=2,
                    label=f"{credit if credit != 'episode' else 'episode reward (GRPO)'}, mean of {len(mine)} seeds")
            ax.set_title(title)
            ax.set_xlabel("GRPO step")
            ax.grid(alpha=0.3)
        if extra:
            for reply, style in (("higher", ":"), ("lower", "-")):
                buckets = [p["step"] for p in mine[0]["sampled_directions"]]
                means = [statistics.mean(100 * r["sampled_directions"][i][f"follows_{reply}"] for r in mine
                                         if r["sampled_directions"][i][f"follows_{reply}"] is not None)
                         for i in range(len(buckets))]
                axes[-1].plot(buckets, means, color=colors[credit], linestyle=style, marker="o",
                             label=f"{credit}: guess {'above' if reply == 'higher' else 'below'} after \"{reply}\"")
            axes[-1].set_title("sampled training games: the next guess\nmoves the way the reply said (per 10 steps)")
            axes[-1].set_xlabel("GRPO step")
            axes[-1].set_ylabel("%")
            axes[-1].grid(alpha=0.3)
            axes[-1].legend(fontsize=8)
    for ax, (_, _, scale) in zip(axes, panels):
        ax.set_ylabel("%" if scale == 100 else "")
    axes[0].legend(fontsize=8)
    credits = " vs ".join({"episode": "episode reward", "gigpo": "GiGPO"}[c] for c in dict.fromkeys(r["credit"] for r in results))
    save_figure(fig, path, title=f"SmolLM2-135M-Instruct, {game.replace('_', ' ')}{subtitle}: {credits} (thin: seeds)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("samples")
    s.add_argument("--game", choices=list(GAMES), required=True)
    s.add_argument("--problems", type=int, default=16)
    s.add_argument("--samples", type=int, default=8)
    s.add_argument("--output", default="runs/real_games")
    s.add_argument("--set", nargs="*", default=[], help="recipe overrides")
    t = sub.add_parser("train")
    t.add_argument("--game", choices=list(GAMES), required=True)
    t.add_argument("--credits", nargs="+", choices=list(CREDITS), default=list(CREDITS))
    t.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    t.add_argument("--steps", type=int, default=None)
    t.add_argument("--recipe", default=None, help="another recipe of the game (default recipes/smollm2_<game>.yaml), "
                   "e.g. recipes/smollm2_guess_number_openenv.yaml; give it its own --output")
    t.add_argument("--output", default="runs/real_games")
    t.add_argument("--set", nargs="*", default=[], help="more recipe overrides")
    m = summary_arguments(sub, "runs/real_games")
    m.add_argument("--game", choices=list(GAMES), required=True)
    m.add_argument("--title", default="", help="added to the plot's title after the game's name")
    c = sub.add_parser("compare")
    c.add_argument("--game", choices=list(GAMES), required=True)
    c.add_argument("--runs", nargs="+", required=True, help="LABEL=DIR, each a `train --output`")
    c.add_argument("--credit", choices=list(CREDITS), default="episode")
    c.add_argument("--plot", default=None)
    b = sub.add_parser("baselines")
    b.add_argument("--game", choices=list(GAMES), required=True)
    args = parser.parse_args()
    {"samples": samples, "train": train, "summary": summary, "compare": compare,
     "baselines": lambda a: print_baselines(a.game)}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
