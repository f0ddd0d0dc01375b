"""Self-play on the real model (docs/self_play.md, docs/results.md): Absolute Zero and SPIRAL-style games on
SmolLM2-135M-Instruct, each seed one `rlvr train` of a recipe, measured apart from the training reward.

    python -m benchmarks.self_play heldout                       # every held-out answer, run again in the sandbox
    python -m benchmarks.self_play azr [--seeds 0 1 2] [--out runs/self_play] [key=value ...]
    python -m benchmarks.self_play games --game tictactoe [--seeds 0 1 2] [--out runs/self_play] [key=value ...]
    python -m benchmarks.self_play games --game kuhn_poker [--seeds 0 1 2] [--out runs/self_play] [key=value ...]
    python -m benchmarks.self_play summary [--out runs/self_play] [--plots docs/img]
    python -m benchmarks.self_play baselines                     # the baselines the summary prints

`azr` trains recipes/absolute_zero.yaml per seed. Held-out accuracy (114 program-output questions written apart from
the proposer and disjoint from every program the solver trains on, greedy, every evaluation's completions logged; a
run made before the 6 questions about the seed program were left out is read on the same 114) is read three ways: the
run's own verdicts, and two exact checks written here, sharing no code with the verifier: the program is run in a
plain subprocess on its input (the held-out programs are ours) and the reply must state that value
(ast.literal_eval, or the text for a string) on the asked line, its last line `Output: <value>` (stricter than the
verifier, which also reads a value inside a sentence, a fenced block or a bare reply), or after its last `Output:`
anywhere in a line (a code comment, a sentence); the questions where that reading and the verifier part are counted. The
proposer's side comes from the run's metrics: per step, the share of valid proposals, the mean lines of the fresh
valid programs, the solver's success on them and the learnability they earned.

`games` trains recipes/<game>_self_play.yaml per seed (both seats by the current policy) with its held-out matches
against a random legal player (TicTacToe) or Kuhn's equilibrium player (Kuhn poker) during training, then measures,
for the starting model and the final one:
- TicTacToe: win-or-draw per seat against a random player (the run's evaluations, each greedy match's outcome
  recomputed by a referee written here from the logged conversation) and against the starting checkpoint (a frozen
  copy of the starting model playing the other seat, sampled at temperature 1);
- Kuhn poker: the exact expected chips per hand against the equilibrium player, per seat: the policy's greedy action
  at each of its 6 information sets (card x history) is read from its replies, then the value is summed over the 6
  deals and the equilibrium's mixed actions (alpha 1/6) by hand; the game value is -1/18 (player 1), +1/18
  (player 2). Also its win rate per seat against the starting checkpoint.

Every run writes OUT/<kind>/seed<S>/ (the run) and OUT/<kind>/seed<S>.json (its figures); `summary` prints the tables
of docs/results.md and draws docs/img/self_play_*.png. Runs are niced (nice 15, one thread each) and go one at a time.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import statistics
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

from benchmarks.common import ROOT, cell, mean, spread, step_windows, window_mean

RECIPES = {"azr": "absolute_zero.yaml", "tictactoe": "tictactoe_self_play.yaml",
           "kuhn_poker": "kuhn_poker_self_play.yaml"}
HELDOUT = ROOT / "rlvr" / "recipes" / "data" / "program_outputs.jsonl"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def train(recipe: str, out: Path, seed: int, overrides: list[str]) -> float:
    """`rlvr train` of a recipe for one seed, niced, one thread; its wall time in seconds (an existing finished run
    is kept)."""
    metrics = read_jsonl(out / "metrics.jsonl")
    if (out / "checkpoints").is_dir() and metrics and (out / "report.html").is_file():
        print(f"{out}: finished earlier, kept")
        return float("nan")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    command = ["nice", "-n", "15", sys.executable, "-m", "rlvr", "train", str(ROOT / "recipes" / recipe), f"seed={seed}",
               f"tracking.output_dir={out}", "tracking.console=false", *overrides]
    if (out / "checkpoints").is_dir():
        command += ["--resume", "auto"]
    print(" ".join(command), flush=True)
    start = time.time()
    subprocess.run(command, env=env, check=True)
    return time.time() - start


# ------------------------------------------------------------------ Absolute Zero


def program_value(program: str, arguments: str):
    """What the held-out program returns on its input, run in a plain subprocess (our own programs)."""
    code = f"{program}\nprint(repr(f({arguments})))"
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=20, check=True)
    return ast.literal_eval(done.stdout.strip())


NO_ANSWER = object()  # a reply that states no value in the asked form


def reply_value(reply: str, anywhere: bool = False):
    """The value a reply states in the form the prompt asks for, "a line `Output: <the value>`", read apart from
    rlvr's verifier and stricter than it: the last line that, backticks and spaces aside, begins with 'Output:'; its
    rest as a Python literal, else as the text (a string written without quotes). NO_ANSWER when no line has that
    form (the verifier also takes 'output:' inside a sentence, a ```output block, the last fenced block or the whole
    reply: tests/test_agent_benchmark_checks.py lists where the two part).

    `anywhere`: the value after the reply's last 'Output:' wherever it stands in its line (inside a sentence, a code
    comment such as `print(f(2))  # Output: 4`), the rest of that line read as above: the verifier's reading of a
    value inside a sentence, checked apart from its code."""
    for line in reversed(reply.splitlines()):
        line = line.strip().strip("`").strip()
        at = line.lower().rfind("output:") if anywhere else (0 if line[:7].lower() == "output:" else -1)
        if at >= 0:
            text = line[at + 7 :].strip().strip("`").strip()
            try:
                return ast.literal_eval(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return text
    return NO_ANSWER


def exact_correct(reply: str, expected, anywhere: bool = False) -> bool:
    """The reply states `expected` (a bool only as a bool, a number as any equal number, else equal and of its
    type); `anywhere` as in `reply_value`."""
    got = reply_value(reply, anywhere)
    if isinstance(got, bool) or isinstance(expected, bool):
        return type(got) is type(expected) and got == expected
    if isinstance(got, (int, float)) and isinstance(expected, (int, float)):
        return got == expected
    return type(got) is type(expected) and got == expected


def heldout() -> None:
    """Every held-out question's stated output against running its program, in the rlvr sandbox and in a plain
    subprocess."""
    from rlvr.tasks.program_io import checked_outputs, same_value

    rows = read_jsonl(HELDOUT)
    sandbox = sum(same_value(r["output"], (checked_outputs(r["program"], [r["input"]]).outputs or ["<none>"])[0])
                  for r in rows)
    plain = sum(program_value(r["program"], r["input"]) == ast.literal_eval(r["output"]) for r in rows)
    print(f"{len(rows)} held-out questions; stated output confirmed in the sandbox (two runs): {sandbox}, "
          f"by a plain subprocess: {plain}")


def azr_figures(run: Path) -> dict:
    values = {r["id"]: program_value(r["program"], r["input"]) for r in read_jsonl(HELDOUT)}
    evals: dict[int, dict] = {}
    for row in read_jsonl(run / "eval_completions.jsonl"):
        if row["uid"] not in values:  # a question no longer held out (it asked about the seed program)
            continue
        e = evals.setdefault(row["step"], {"n": 0, "verifier": 0, "exact": 0, "stated_anywhere": 0, "disputes": 0})
        anywhere = exact_correct(row["completion"], values[row["uid"]], anywhere=True)
        e["n"] += 1
        e["verifier"] += bool(row["correct"])
        e["exact"] += exact_correct(row["completion"], values[row["uid"]])
        e["stated_anywhere"] += anywhere
        e["disputes"] += anywhere != bool(row["correct"])  # a question the two readings of a value in a line part on
    metrics = [r for r in read_jsonl(run / "metrics.jsonl") if r["step"] > 0]

    def per_step(key):
        return [(r["step"], r[key]) for r in metrics if isinstance(r.get(key), (int, float)) and r[key] == r[key]]

    return {"eval": {s: {k: v / e["n"] if k not in ("n", "disputes") else v for k, v in e.items()}
                     for s, e in sorted(evals.items())},
            "valid": per_step("reward/verifier/valid"),
            "program_lines": per_step("task/azr/fresh_program_lines"),
            "fresh_solve_rate": per_step("task/azr/fresh_solve_rate"),
            "learnability": per_step("task/azr/learnability"),
            "solve_accuracy": {t: per_step(f"role/azr/{t}.solve/accuracy") for t in ("deduction", "abduction",
                                                                                    "induction")},
            "rejected": {k.removeprefix("task/azr/rejected/"): v for k, v in metrics[-1].items()
                         if k.startswith("task/azr/rejected/")} if metrics else {},
            "proposals": metrics[-1].get("task/azr/proposals") if metrics else None,
            "step_s": statistics.mean(r["perf/step_s"] for r in metrics) if metrics else None}


# ------------------------------------------------------------------ games

def ttt_referee(messages: list[dict], seat: int) -> str:
    """A TicTacToe seat's result ('win', 'draw', 'loss') against a player who only makes legal moves (the random
    player), from the seat's conversation alone: the other seat's moves from "<mark> took square N", its own from
    the first number of each reply (a number that is not an empty square loses). A conversation ends with the seat's
    move; if that did not end the match, the other seat's next move did: it took the last empty square (win or
    draw decided by the board) or won."""
    marks = ("X", "O")
    board: dict[int, str] = {}

    def winner():
        for a, b, c in ((1, 2, 3), (4, 5, 6), (7, 8, 9), (1, 4, 7), (2, 5, 8), (3, 6, 9), (1, 5, 9), (3, 5, 7)):
            if board.get(a) and board.get(a) == board.get(b) == board.get(c):
                return board[a]
        return None

    for m in messages:
        if m["role"] == "user":
            for mark, square in re.findall(r"([XO]) took square (\d)", m["content"]):
                board[int(square)] = mark
            continue
        found = re.search(r"\d+", m["content"])
        square = int(found.group()) if found else 0
        if not 1 <= square <= 9 or square in board:
            return "loss"
        board[square] = marks[seat]
    if winner():
        return "win" if winner() == marks[seat] else "loss"
    empty = [s for s in range(1, 10) if s not in board]
    if not empty:
        return "draw"
    if len(empty) == 1:  # the other seat filled the board
        board[empty[0]] = marks[1 - seat]
        return "loss" if winner() else "draw"
    return "loss"  # the match ended on the other seat's move with squares left: it won


def ttt_figures(run: Path) -> dict:
    """Per evaluation step: win-or-draw per seat against the random player, by the run's verdicts and the referee."""
    out: dict[int, dict] = {}
    for row in read_jsonl(run / "eval_completions.jsonl"):
        seat = int(row["uid"].split("-")[1]) % 2
        e = out.setdefault(row["step"], {f"seat{s}": [0, 0, 0] for s in (0, 1)})  # matches, run says, referee says
        result = ttt_referee(row.get("messages", []), seat)
        e[f"seat{seat}"][0] += 1
        e[f"seat{seat}"][1] += bool(row["correct"])
        e[f"seat{seat}"][2] += result != "loss"
    return {s: {seat: {"matches": v[0], "run": v[1] / v[0], "referee": v[2] / v[0]} for seat, v in e.items()}
            for s, e in sorted(out.items())}


def greedy_replies(model_dir: str, conversations: list[list[dict]], max_new_tokens: int) -> list[str]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    replies = []
    with torch.no_grad():
        for messages in conversations:
            ids = tok(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
                      add_special_tokens=False, return_tensors="pt")
            out = model.generate(**ids, do_sample=False, max_new_tokens=max_new_tokens, pad_token_id=tok.eos_token_id)
            replies.append(tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True))
    return replies


def kuhn_action(reply: str, offered: tuple[str, ...]) -> str | None:
    """The earliest offered action word in a reply (written apart from the environment's parser)."""
    hits = [(m.start(), a) for a in offered for m in re.finditer(rf"\b{a}\b", reply.lower())]
    return min(hits)[1] if hits else None


def kuhn_exact_values(model_dir: str, max_new_tokens: int) -> dict:
    """Expected chips per hand of the model's greedy play against Kuhn's equilibrium player (alpha 1/6), per seat,
    exactly: its greedy reply (at most `max_new_tokens`, as in training) at each information set, then every deal and
    every equilibrium branch."""
    import random

    from rlvr.envs.kuhn_poker import KuhnPoker
    from rlvr.envs.two_player import Match

    cards = ("J", "Q", "K")

    def seat_view(seat: int, card: str, before: tuple[str, ...]) -> list[dict]:
        """The conversation the environment gives `seat` holding `card` after the moves `before` (its own first
        reply, if any, is added by the caller)."""
        game = KuhnPoker(random.Random(0))
        game.cards = (card, next(c for c in cards if c != card)) if seat == 0 else (
            next(c for c in cards if c != card), card)
        match = Match(game, [None, None])
        for move in before:
            match.move(match.to_move(), move)
        return [{"role": "user", "content": KuhnPoker.rules}, {"role": "user", "content": match.observation(seat)}]

    keys = [(0, c, ()) for c in cards] + [(1, c, h) for c in cards for h in (("check",), ("bet",))]
    queries = [seat_view(seat, c, h) for seat, c, h in keys]
    first = dict(zip(keys, greedy_replies(model_dir, queries, max_new_tokens)))
    strategy = {k: kuhn_action(v, ("check", "bet") if k[2] in ((), ("check",)) else ("call", "fold"))
                for k, v in first.items()}
    # player 1's second decision, after checking and facing a bet, continues its own conversation
    follow, follow_keys = [], []
    for c in cards:
        if strategy[(0, c, ())] == "check":
            game = KuhnPoker(random.Random(0))
            game.cards = (c, next(x for x in cards if x != c))
            match = Match(game, [None, None])
            opening = match.observation(0)
            match.move(0, "check")
            match.move(1, "bet")
            follow.append([{"role": "user", "content": KuhnPoker.rules}, {"role": "user", "content": opening},
                           {"role": "assistant", "content": first[(0, c, ())]},
                           {"role": "user", "content": match.observation(0)}])
            follow_keys.append((0, c, ("check", "bet")))
    for k, reply in zip(follow_keys, greedy_replies(model_dir, follow, max_new_tokens)):
        strategy[k] = kuhn_action(reply, ("call", "fold"))
    seat0 = sum(as_player1(strategy, c0, c1) for c0 in cards for c1 in cards if c0 != c1) / 6
    seat1 = sum(as_player2(strategy, c0, c1) for c0 in cards for c1 in cards if c0 != c1) / 6
    return {"seat0": float(seat0), "seat1": float(seat1), "strategy": {f"{k[0]}/{k[1]}/{'-'.join(k[2])}": v
                                                                      for k, v in strategy.items()}}


# Kuhn's equilibrium (alpha 1/6): player 1 bets first, calls after check-bet; player 2 calls a bet, bets after a check
A, THIRD = Fraction(1, 6), Fraction(1, 3)
EQ_P1_BET = {"J": A, "Q": Fraction(0), "K": 3 * A}
EQ_P1_CALL = {"J": Fraction(0), "Q": A + THIRD, "K": Fraction(1)}
EQ_P2_CALL = {"J": Fraction(0), "Q": THIRD, "K": Fraction(1)}
EQ_P2_BET = {"J": THIRD, "Q": Fraction(0), "K": Fraction(1)}


def showdown(mine: str, theirs: str, stake: int) -> int:
    return stake if "JQK".index(mine) > "JQK".index(theirs) else -stake


def as_player1(strategy: dict, mine: str, theirs: str) -> Fraction:
    """The model's expected chips as player 1 holding `mine` against the equilibrium player 2 holding `theirs`; an
    action it does not name (None) loses 2."""
    act = strategy[(0, mine, ())]
    if act is None:
        return Fraction(-2)
    if act == "bet":
        return EQ_P2_CALL[theirs] * showdown(mine, theirs, 2) + (1 - EQ_P2_CALL[theirs])
    then = strategy.get((0, mine, ("check", "bet")))
    facing_bet = -2 if then is None else showdown(mine, theirs, 2) if then == "call" else -1
    return EQ_P2_BET[theirs] * facing_bet + (1 - EQ_P2_BET[theirs]) * showdown(mine, theirs, 1)


def as_player2(strategy: dict, theirs: str, mine: str) -> Fraction:
    """The model's expected chips as player 2 holding `mine` against the equilibrium player 1 holding `theirs`."""
    facing_bet = strategy[(1, mine, ("bet",))]
    after_bet = Fraction(-2) if facing_bet is None else showdown(mine, theirs, 2) if facing_bet == "call" else -1
    after_check_act = strategy[(1, mine, ("check",))]
    if after_check_act is None:
        after_check = Fraction(-2)
    elif after_check_act == "check":
        after_check = Fraction(showdown(mine, theirs, 1))
    else:  # the model bets; player 1 calls or folds
        after_check = EQ_P1_CALL[theirs] * showdown(mine, theirs, 2) + (1 - EQ_P1_CALL[theirs])
    return EQ_P1_BET[theirs] * after_bet + (1 - EQ_P1_BET[theirs]) * after_check


def against_checkpoint(game: str, run: Path, model_dir: str, opponent_dir: str, matches: int) -> dict:
    """Win-or-draw (TicTacToe) or win (Kuhn) rate and chips per seat of `model_dir`'s greedy play against a frozen
    `opponent_dir` (sampled at temperature 1): the trainer's evaluation with eval_opponent set to it."""
    from rlvr.config import load_config
    from rlvr.evaluation.evaluate import eval_settings, evaluate_model

    cfg = load_config(run / "config.yaml", [f"data.tasks.0.args.eval_opponent={opponent_dir}",
                                            f"data.tasks.0.args.eval_size={matches}"])
    settings = eval_settings(cfg)
    settings.num_problems = matches
    episodes = evaluate_model(cfg, model_dir, settings).episode_metrics()
    return {f"seat{s}": {"win_or_draw": episodes[f"seat{s}/win_or_draw"], "return": episodes[f"seat{s}/return"],
                         "illegal": episodes[f"seat{s}/illegal_move"]} for s in (0, 1)}


def starting_model() -> str:
    from rlvr.config import ModelConfig
    from rlvr.models.loading import model_source

    return model_source(ModelConfig(name="smollm2-135m-instruct"))


def final_checkpoint(run: Path) -> str:
    return str(sorted((run / "checkpoints").glob("step-*"))[-1])


def game_figures(game: str, run: Path, vs_checkpoint: int) -> dict:
    base, final = starting_model(), final_checkpoint(run)
    metrics = [r for r in read_jsonl(run / "metrics.jsonl")]
    evals = {r["step"]: {s: {k: r.get(f"eval/episode/seat{s}/{k}") for k in ("win_or_draw", "return", "illegal_move")}
                         for s in (0, 1)} for r in metrics if "eval/episode/seat0/return" in r}
    figures = {"eval": evals, "step_s": statistics.mean(r["perf/step_s"] for r in metrics if r["step"] > 0),
               "vs_start": {"start": against_checkpoint(game, run, base, base, vs_checkpoint),
                            "final": against_checkpoint(game, run, final, base, vs_checkpoint)}}
    if game == "tictactoe":
        figures["referee"] = ttt_figures(run)
    else:
        from rlvr.config import read_yaml

        tokens = read_yaml(run / "config.yaml")["rollout"]["max_new_tokens"]  # as the run replied
        figures["exact"] = {"start": kuhn_exact_values(base, tokens), "final": kuhn_exact_values(final, tokens)}
    return figures


# ------------------------------------------------------------------ running and summaries


def run_seeds(kind: str, seeds: list[int], out: Path, overrides: list[str], vs_checkpoint: int) -> None:
    for seed in seeds:
        run = out / kind / f"seed{seed}"
        wall = train(RECIPES[kind], run, seed, overrides)
        figures = azr_figures(run) if kind == "azr" else game_figures(kind, run, vs_checkpoint)
        path = out / kind / f"seed{seed}.json"
        old = json.loads(path.read_text()) if path.is_file() else {}
        figures["wall_s"] = wall if wall == wall else old.get("wall_s")
        figures["commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                           capture_output=True, text=True).stdout.strip()
        path.write_text(json.dumps(figures, indent=1))
        print(f"{kind} seed {seed}: {json.dumps(figures)[:600]}", flush=True)


def minutes(out: Path, kind: str, seed: int) -> float:
    """The run's minutes of training steps: the sum of its steps' seconds (perf/step_s, the evaluations at steps
    10, 20, ... included; loading and the step-0 evaluation not), the same for a run resumed from a checkpoint."""
    return sum(r.get("perf/step_s", 0.0) for r in read_jsonl(out / kind / f"seed{seed}" / "metrics.jsonl")) / 60


def print_table(title: str, columns: list[tuple], runs: dict, out: Path, kind: str) -> None:
    """A markdown table: one row per seed, then the mean ± sd over the seeds; columns are (header, format,
    figures -> value), followed by each run's minutes of steps."""
    print(f"\n## {title}")
    print("| seed | " + " | ".join(c[0] for c in columns) + " | minutes of steps |")
    print("|---" * (len(columns) + 2) + "|")
    columns = [*columns, ("minutes of steps", ".0f", None)]
    values = {seed: [c[2](f) for c in columns[:-1]] + [minutes(out, kind, seed)] for seed, f in sorted(runs.items())}
    for seed, row in values.items():
        print(f"| {seed} | " + " | ".join(cell(v, c[1]) for v, c in zip(row, columns)) + " |")
    if len(values) > 1:
        print(f"| mean ± sd ({len(values)} seeds) | "
              + " | ".join(spread([row[i] for row in values.values()], c[1]) for i, c in enumerate(columns)) + " |")


def trend_windows(figures: dict) -> tuple[range, range]:
    """A run's first and last 10 training steps by step number (`step_windows`), the run's last step being the last
    with a logged proposal figure."""
    last = max(s for key in ("valid", "program_lines", "fresh_solve_rate", "learnability") for s, _ in figures[key])
    return step_windows(last, 10)


def first_last(evals: dict, read) -> tuple:
    """A figure at a run's first and last evaluation."""
    steps = sorted(evals, key=int)
    return read(evals[steps[0]]), read(evals[steps[-1]])


def summary(out: Path, plots: Path | None) -> None:
    def load(kind: str) -> dict:
        return {int(p.stem[4:]): json.loads(p.read_text()) for p in sorted((out / kind).glob("seed*.json"))}

    azr = load("azr")
    if azr:
        def trend(key):
            return lambda f: tuple(window_mean(f[key], steps) for steps in trend_windows(f))

        print_table("Absolute Zero: held-out accuracy (114 questions, greedy), proposer's tasks (steps 1-10 -> the "
                    "last 10 steps)", [
                        ("held-out, exact check (the asked line)", ".1%",
                         lambda f: first_last(f["eval"], lambda e: e["exact"])),
                        ("held-out, exact check (Output: anywhere)", ".1%",
                         lambda f: first_last(f["eval"], lambda e: e.get("stated_anywhere"))),
                        ("held-out, run's verifier", ".1%", lambda f: first_last(f["eval"], lambda e: e["verifier"])),
                        ("verifier and Output: anywhere disagree (questions, all evaluations)", ".0f",
                         lambda f: sum(e.get("disputes", float("nan")) for e in f["eval"].values())),
                        ("valid proposals", ".1%", trend("valid")),
                        ("fresh program lines", ".1f", trend("program_lines")),
                        ("solver on fresh tasks", ".2f", trend("fresh_solve_rate")),
                        ("learnability", ".2f", trend("learnability")),
                    ], azr, out, "azr")
        print_azr_baseline_rows(columns=9)
        if plots:
            plot_azr(azr, plots / "self_play_azr.png")
    for game in ("tictactoe", "kuhn_poker"):
        runs = load(game)
        if not runs:
            continue
        key, what = (("win_or_draw", "win-or-draw vs a random player") if game == "tictactoe"
                     else ("return", "chips per hand vs the equilibrium player"))
        columns = [(f"seat {s}: {what}", ".2f",
                    lambda f, s=s, k=key: first_last(f["eval"], lambda e: e[str(s)][k])) for s in (0, 1)]
        columns += [(f"seat {s}: illegal moves", ".2f",
                     lambda f, s=s: first_last(f["eval"], lambda e: e[str(s)]["illegal_move"])) for s in (0, 1)]
        against_start = "win-or-draw" if game == "tictactoe" else "wins"
        columns += [(f"seat {s}: {against_start} vs the starting checkpoint", ".2f",
                     lambda f, s=s: (f["vs_start"]["start"][f"seat{s}"]["win_or_draw"],
                                     f["vs_start"]["final"][f"seat{s}"]["win_or_draw"])) for s in (0, 1)]
        if game == "kuhn_poker":
            columns += [(f"seat {s}: exact chips per hand vs equilibrium", "+.3f",
                         lambda f, s=s: (f["exact"]["start"][f"seat{s}"], f["exact"]["final"][f"seat{s}"]))
                        for s in (0, 1)]
        else:
            columns += [(f"seat {s}: win-or-draw by the referee", ".2f",
                         lambda f, s=s: first_last(f["referee"], lambda e: e[f"seat{s}"]["referee"])) for s in (0, 1)]
        print_table(f"{game}: held-out matches (first -> last evaluation), starting model -> final model",
                    columns, runs, out, game)
        print_baselines(game)
        if plots:
            plot_game(game, runs, plots / f"self_play_{game}.png")


def azr_baselines() -> tuple[int, list[tuple[str, int]]]:
    """The held-out questions, and the simple answers' (name, questions solved) on them (rlvr.evaluation.baselines):
    echoing the input, the best single constant, the best constant per family (chosen with the outputs known)."""
    from rlvr.evaluation import baselines as b

    rows = read_jsonl(HELDOUT)
    best, hits, per_family = b.constant_solved(rows)
    return len(rows), [("echo the input", b.echo_solved(rows)), (f"always Output: {best}", hits),
                       ("the best constant per family (outputs known)", per_family)]


def print_azr_baseline_rows(columns: int) -> None:
    """The simple answers' held-out accuracy as rows of the Absolute Zero table of `columns` cells after the first
    (both exact readings: a constant or echoed answer is written on the asked line); the others are the policy's."""
    n, baselines = azr_baselines()
    for name, solved in baselines:
        share = f"{solved / n:.1%}"
        print(f"| baseline: {name} | {share} | {share} |" + " |" * (columns - 2))


def print_baselines(kind: str) -> None:
    """The simple baselines on the same held-out set as the table above (rlvr.evaluation.baselines)."""
    from rlvr.evaluation import baselines as b

    print(f"\nBaselines, {kind}, on the same held-out set:")
    if kind == "azr":
        n, baselines = azr_baselines()
        print("- " + "; ".join(f"{name}: {solved}/{n}" for name, solved in baselines))
    elif kind == "tictactoe":
        for name, policy in (("random legal player", b.random_legal), ("lowest empty square", b.lowest_empty)):
            exact = [b.tictactoe_vs_random(policy, seat) for seat in (0, 1)]
            heldout = b.tictactoe_heldout(policy)
            print(f"- {name} vs the random player, win-or-draw seat 0 / seat 1: exactly {float(exact[0]):.3f} / "
                  f"{float(exact[1]):.3f}; on the 60 held-out matches {float(heldout['seat0']):.3f} / "
                  f"{float(heldout['seat1']):.3f}")
    else:
        for name, strategy in (("random legal player", b.kuhn_random), ("bet or call with the king only",
                                                                        b.kuhn_king_only)):
            print(f"- {name} vs the equilibrium player, exact chips per hand seat 0 / seat 1: "
                  f"{float(b.kuhn_value(strategy, 0)):+.3f} / {float(b.kuhn_value(strategy, 1)):+.3f}")
        print(f"- the game's value: {-1 / 18:+.3f} / {1 / 18:+.3f}")


def plot_azr(runs: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    for i, (seed, f) in enumerate(sorted(runs.items())):
        steps = sorted(f["eval"], key=int)
        axes[0].plot([int(s) for s in steps], [100 * f["eval"][s].get("stated_anywhere", f["eval"][s]["exact"])
                                               for s in steps], marker="o", color=f"C{i}", label=f"seed {seed}")
        axes[0].plot([int(s) for s in steps], [100 * f["eval"][s]["exact"] for s in steps], marker="x", ls=":",
                     color=f"C{i}", label="the asked line only" if i == 0 else None)
        for ax, key in zip(axes[1:], ("valid", "program_lines", "fresh_solve_rate")):
            points = f[key]
            if points:
                xs, ys = zip(*points)
                k = max(1, len(ys) // 8)
                smooth = [mean(ys[max(0, j - k + 1): j + 1]) for j in range(len(ys))]
                ax.plot(xs, smooth, color=f"C{i}", label=f"seed {seed}")
    n, baselines = azr_baselines()
    for (name, solved), style in zip(baselines, (":", "-.", "--"), strict=True):
        axes[0].axhline(100 * solved / n, color="gray", ls=style, lw=1, label=name)
    titles = ("held-out accuracy (%), exact check (Output: anywhere)", "valid proposals (share, smoothed)",
              "lines of the fresh valid programs (smoothed)", "solver success on fresh tasks (smoothed)")
    for ax, title in zip(axes, titles):
        ax.set(xlabel="step", title=title)
        ax.title.set_fontsize(9)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def plot_game(game: str, runs: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key = "win_or_draw" if game == "tictactoe" else "return"
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    for i, (seed, f) in enumerate(sorted(runs.items())):
        steps = sorted(f["eval"], key=int)
        for s, ls in ((0, "-"), (1, "--")):
            axes[s].plot([int(x) for x in steps], [f["eval"][x][str(s)][key] for x in steps], ls=ls, marker="o",
                         color=f"C{i}", label=f"seed {seed}")
            axes[2].plot([int(x) for x in steps], [f["eval"][x][str(s)]["illegal_move"] for x in steps], ls=ls,
                         marker=".", color=f"C{i}", label=f"seed {seed}, seat {s}")
    opponent = "a random player" if game == "tictactoe" else "the equilibrium player"
    what = "win or draw" if game == "tictactoe" else "chips per hand"
    for s, ax in enumerate(axes[:2]):
        ax.set(xlabel="step", title=f"seat {s}: {what} against {opponent} (held out)")
        if game == "kuhn_poker":
            ax.axhline(-1 / 18 if s == 0 else 1 / 18, color="black", lw=1, ls=":", label="game value")
    axes[2].set(xlabel="step", title="illegal moves (share of held-out matches)")
    for ax in axes:
        ax.title.set_fontsize(9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["heldout", "azr", "games", "summary", "baselines"])
    parser.add_argument("--game", choices=["tictactoe", "kuhn_poker"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "self_play")
    parser.add_argument("--plots", type=Path, default=None)
    parser.add_argument("--vs-checkpoint", type=int, default=40, help="matches against the starting checkpoint")
    parser.add_argument("overrides", nargs="*", help="recipe overrides, key=value")
    args = parser.parse_args()
    if args.command == "heldout":
        heldout()
    elif args.command == "azr":
        run_seeds("azr", args.seeds, args.out, args.overrides, args.vs_checkpoint)
    elif args.command == "games":
        if args.game is None:
            parser.error("games needs --game tictactoe or --game kuhn_poker")
        run_seeds(args.game, args.seeds, args.out, args.overrides, args.vs_checkpoint)
    elif args.command == "baselines":
        for kind in ("azr", "tictactoe", "kuhn_poker"):
            print_baselines(kind)
    else:
        summary(args.out, args.plots)


if __name__ == "__main__":
    main()
