"""Command line: rlvr train | sft | quickstart | eval | tasks | algorithms."""

from __future__ import annotations

import argparse
import sys

from rlvr.errors import RlvrError


def _config(args):
    from rlvr.config import load_config

    return load_config(args.recipe, args.overrides)


def cmd_train(args) -> None:
    from rlvr.trainer import Trainer

    Trainer(_config(args), resume=args.resume).fit()


def cmd_sft(args) -> None:
    from rlvr.sft import run_sft

    print(f"saved {run_sft(_config(args))}")


def cmd_quickstart(args) -> None:
    from rlvr.quickstart import run_quickstart

    run_quickstart(seed=args.seed, output_dir=args.output, overrides=args.overrides)


def cmd_eval(args) -> None:
    from rlvr.config import load_config
    from rlvr.quickstart import evaluate_checkpoint

    overrides = [f"data.tasks=[{{name: {args.task}}}]", *args.overrides]
    cfg = load_config(None, overrides)
    for model in args.models:
        acc = evaluate_checkpoint(cfg, model, args.num_problems)
        print(f"{model}: greedy accuracy {acc:.3f}")


def cmd_tasks(args) -> None:
    from rlvr.tasks import TASKS

    for name in TASKS.names():
        print(f"{name:16s} {TASKS.summary(name)}")


def cmd_algorithms(args) -> None:
    from rlvr.algorithms import ADVANTAGES, KL_ESTIMATORS, POLICY_LOSSES, PRESETS

    print("presets (algorithm.preset=NAME):")
    for name in sorted(PRESETS):
        p = PRESETS[name]
        needs = f" [also: {', '.join(p.requires)}]" if p.requires else ""
        print(f"  {name:16s} {p.paper}: {p.description}{needs}")
    for title, reg in (("advantage estimators", ADVANTAGES), ("policy losses", POLICY_LOSSES),
                       ("KL estimators", KL_ESTIMATORS)):
        print(f"{title}:")
        for name in reg.names():
            print(f"  {name:16s} {reg.summary(name)}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr", description="RL from verifiable rewards for language models.")
    sub = parser.add_subparsers(dest="command", required=True)

    def recipe_command(name, func, help_text):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("recipe", nargs="?", help="YAML recipe (see recipes/)")
        p.add_argument("overrides", nargs="*", help="key.sub=value overrides")
        p.set_defaults(func=func)
        return p

    recipe_command("train", cmd_train, "RL-train a policy").add_argument(
        "--resume", help="checkpoint directory, or 'auto' for the run's newest complete checkpoint")
    recipe_command("sft", cmd_sft, "supervised cold start on demonstrations")
    q = sub.add_parser("quickstart", help="tiny model: SFT, then GRPO, on CPU in minutes")
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--output", default="runs/quickstart")
    q.add_argument("overrides", nargs="*")
    q.set_defaults(func=cmd_quickstart)
    e = sub.add_parser("eval", help="greedy held-out accuracy of model checkpoints")
    e.add_argument("models", nargs="+")
    e.add_argument("--task", required=True)
    e.add_argument("--num-problems", type=int, default=200)
    e.add_argument("--set", dest="overrides", action="append", default=[], help="key.sub=value")
    e.set_defaults(func=cmd_eval)
    sub.add_parser("tasks", help="list tasks").set_defaults(func=cmd_tasks)
    sub.add_parser("algorithms", help="list estimators and losses").set_defaults(func=cmd_algorithms)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # 'rlvr train optim.lr=1e-5' (no recipe): the first positional is an override, not a file.
    if getattr(args, "recipe", None) and "=" in args.recipe and not args.recipe.endswith((".yaml", ".yml")):
        args.overrides.insert(0, args.recipe)
        args.recipe = None
    try:
        args.func(args)
    except RlvrError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0
