"""Command line: rlvr train | sft | quickstart | eval | serve | report | tasks | algorithms | verify."""

from __future__ import annotations

import argparse
import sys

from rlvr.errors import RlvrError


def _config(args):
    from rlvr.config import load_config

    return load_config(args.recipe, args.overrides)


def cmd_train(args) -> None:
    from rlvr.distributed import end_processes
    from rlvr.training.trainer import Trainer

    cfg = _config(args)
    if args.dry_run:
        print_dry_run(cfg)
        return
    try:
        Trainer(cfg, resume=args.resume).fit()
    finally:
        end_processes()


def print_dry_run(cfg) -> None:
    """The resolved config and the run's facts (model size, task sizes, the first prompt as encoded)."""
    from rlvr.config.yaml_io import dump_yaml
    from rlvr.reporting.run_facts import describe_run
    from rlvr.tracking.console import format_facts

    print("# resolved config")
    print(dump_yaml(cfg.model_dump(mode="json")).rstrip())
    print("\n# run")
    print(format_facts(describe_run(cfg)))
    print("\ndry run: nothing was trained or written.")


def cmd_sft(args) -> None:
    from rlvr.training.sft import run_sft

    print(f"saved {run_sft(_config(args))}")


def cmd_quickstart(args) -> None:
    from rlvr.quickstart import run_quickstart

    run_quickstart(seed=args.seed, output_dir=args.output, overrides=args.overrides)


def cmd_serve(args) -> None:
    from rlvr.cli.serve import run_serve_command

    run_serve_command(args)


def cmd_eval(args) -> None:
    from rlvr.cli.eval import run_eval_command

    run_eval_command(args)


def cmd_report(args) -> None:
    from rlvr.reporting.run_report import write_run_report

    print(f"wrote {write_run_report(args.run_dir, args.output)}")


def cmd_tasks(args) -> None:
    from rlvr.envs import ENVIRONMENTS
    from rlvr.tasks import TASKS

    for name in TASKS.names():
        print(f"{name:16s} {TASKS.summary(name)}")
    print("\nenvironments (data.tasks[].env, docs/environments.md):")
    for name in ENVIRONMENTS.names():
        print(f"{name:16s} {ENVIRONMENTS.summary(name)}")


def cmd_algorithms(args) -> None:
    from rlvr.algorithms import ADVANTAGES, KL_ESTIMATORS, POLICY_LOSSES, PRESETS, TURN_CREDIT
    from rlvr.curriculum import GROUP_FILTERS, SAMPLERS
    from rlvr.rewards import REWARDS

    print("presets (algorithm.preset=NAME):")
    for name in sorted(PRESETS):
        p = PRESETS[name]
        needs = f" [also: {', '.join(p.requires)}]" if p.requires else ""
        print(f"  {name:16s} {p.paper}: {p.description}{needs}")
    for title, reg in (("advantage estimators", ADVANTAGES), ("turn-level credit (algorithm.turn_credit)", TURN_CREDIT),
                       ("policy losses", POLICY_LOSSES),
                       ("KL estimators", KL_ESTIMATORS), ("prompt samplers (data.sampler)", SAMPLERS),
                       ("group filters (data.filter)", GROUP_FILTERS),
                       ("shipped rewards (rewards.functions[].function; process rewards: rewards.step_reward)",
                        REWARDS)):
        print(f"{title}:")
        for name in reg.names():
            print(f"  {name:16s} {reg.summary(name)}")


def cmd_verify(args) -> int | None:
    from rlvr.cli.verify import audit_command, hacks_command, judge_probe_command, score_command
    from rlvr.errors import ConfigError

    if args.paths[0] == "judge-probe":
        if len(args.paths) != 1 or not args.judge:
            raise ConfigError("Usage: rlvr verify judge-probe --judge MODEL [--set KEY=VALUE ...] [--problems N] "
                              "[--seed S] (no file).")
        return judge_probe_command(args.judge, args.overrides, args.problems, args.seed, args.json, args.strict,
                                   args.defences)
    if args.paths[0] == "hacks":
        if len(args.paths) != 1:
            raise ConfigError("Usage: rlvr verify hacks [--only NAME,...] [--problems N] [--seed S] (no file).")
        return hacks_command(args.only, args.problems, args.seed, args.workers, args.timeout, args.json, args.strict)
    if args.paths[0] == "audit":
        if len(args.paths) != 2:
            raise ConfigError("Usage: rlvr verify audit FILE.jsonl (rows with gold, answer or completion, expected).")
        audit_command(args.paths[1], args.workers, args.timeout, args.json)
    elif len(args.paths) != 1:
        raise ConfigError("Usage: rlvr verify --task NAME [--set key=value ...] FILE.jsonl (one file).")
    else:
        score_command(args.paths[0], args.task, args.verifier, args.overrides, args.workers, args.timeout, args.json)


def build_parser() -> argparse.ArgumentParser:
    from rlvr import __version__
    from rlvr.config import RECIPES, shipped_recipes

    parser = argparse.ArgumentParser(prog="rlvr", description="RL from verifiable rewards for language models.")
    parser.add_argument("--version", action="version", version=f"rlvr {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def recipe_command(name, func, help_text):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("recipe", nargs="?",
                       help=f"YAML recipe file, or a shipped recipe's name ({', '.join(shipped_recipes())})")
        p.add_argument("overrides", nargs="*", help="key.sub=value overrides (anywhere on the line; list items by "
                       "index: data.tasks.0.args.path=x.jsonl)")
        p.set_defaults(func=func)
        return p

    train = recipe_command("train", cmd_train, "RL-train a policy")
    train.add_argument("--resume", help="checkpoint directory, or 'auto' for the run's newest complete checkpoint")
    train.add_argument("--dry-run", action="store_true", help="print the resolved config, model size, task sizes "
                       "and the first encoded prompt, then exit without training")
    recipe_command("sft", cmd_sft, "supervised cold start on demonstrations")
    q = sub.add_parser("quickstart", help="tiny model: SFT, then GRPO, on CPU in minutes",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="A tiny config-built model learns 2-digit addition on a CPU: SFT on a few\n"
                       "demonstrations, then GRPO on fresh prompts with only the verifier as reward;\n"
                       "reports held-out accuracy before and after RL.\n\n"
                       f"Recipe: {RECIPES / 'quickstart.yaml'}")
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--output", default="runs/quickstart")
    q.add_argument("overrides", nargs="*")
    q.set_defaults(func=cmd_quickstart)
    e = sub.add_parser("eval", help="pass@k, maj@k, avg@N and greedy accuracy of checkpoints, compared",
                       description="Evaluate one or more saved models on the same held-out problems: greedy "
                       "accuracy and, from --samples N completions per problem, pass@k, maj@k, avg@N with bootstrap "
                       "intervals, the reasoning boundary between models, answer diversity and token entropy. "
                       "With --output: eval.json, report.md, passk.png, boundary.png (docs/evaluation.md).")
    e.add_argument("models", nargs="+", help="model directories (HF format), checkpoints (RUN/checkpoints/step-N) "
                   "or run directories (their newest checkpoint)")
    e.add_argument("--task", help="a registered task with default arguments (see `rlvr tasks`); default: the "
                   "recipe's tasks, else those of the first model's run (its config.yaml)")
    e.add_argument("--recipe", help="YAML recipe giving task arguments, prompts, model loading and sampling")
    e.add_argument("--samples", type=int, default=0, help="completions sampled per problem, N (0: greedy only)")
    e.add_argument("--k", help="comma-separated k for pass@k and maj@k (default: 1, 2, 4, ... up to N)")
    e.add_argument("--num-problems", type=int, default=200, help="held-out problems per task")
    e.add_argument("--temperature", type=float, help="sampling temperature (default: the recipe's rollout)")
    e.add_argument("--keep-completions", type=int, default=4, metavar="N",
                   help="completions kept per problem in eval.json (greedy first); a few shown in report.md")
    e.add_argument("--labels", help="comma-separated model names for tables and plots (default: directory names)")
    e.add_argument("--output", help="directory for eval.json, report.md and the plots")
    e.add_argument("--set", dest="overrides", action="append", default=[], help="key.sub=value config override")
    e.set_defaults(func=cmd_eval)
    sv = sub.add_parser("serve", help="an OpenAI-compatible chat endpoint over a saved model",
                        description="Serve POST /v1/chat/completions (messages, tools, n, temperature, top_p, "
                        "max_tokens, stop, logprobs) and GET /v1/models over a saved model, for evaluation with any "
                        "OpenAI client (docs/environments.md, 'Your own agent program').")
    sv.add_argument("model", help="a checkpoint or run directory, a .gguf file or a packaged model's name")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    sv.add_argument("--port", type=int, default=8000, help="port (0: a free one; default 8000)")
    sv.add_argument("--name", help="the model's name in requests (default: MODEL as given)")
    sv.add_argument("--max-tokens", type=int, help="most new tokens a call may ask (default rollout.max_new_tokens)")
    sv.add_argument("--set", dest="overrides", action="append", default=[], help="key.sub=value config override")
    sv.set_defaults(func=cmd_serve)
    rp = sub.add_parser("report", help="one self-contained HTML page about a training run",
                        description="Write RUN_DIR/report.html: metric curves, the reward of each function, the "
                        "prompt pool's pass rates over time, held-out pass@k, and sampled completions with their "
                        "scores (docs/tracking.md). Every run writes it at its end too.")
    rp.add_argument("run_dir", help="a training run's output directory (tracking.output_dir)")
    rp.add_argument("--output", help="where to write the page (default: RUN_DIR/report.html)")
    rp.set_defaults(func=cmd_report)
    v = sub.add_parser("verify", help="score a JSONL of completions with a task's verifier, audit the math verifier, "
                       "or probe the rule verifiers with reward hacks",
                       usage="rlvr verify (--task NAME | --verifier SPEC) [--set KEY=VALUE ...] [options] FILE.jsonl\n"
                             "       rlvr verify audit [options] FILE.jsonl\n"
                             "       rlvr verify hacks [--only NAME,...] [--problems N] [--seed S] [options]\n"
                             "       rlvr verify judge-probe --judge MODEL [--set KEY=VALUE ...] [--problems N] [--seed S] "
                             "[--defences off,on]",
                       description="Score rows holding 'completion' (plus 'prompt', 'answer', ... as the verifier "
                       "needs; a run's completions.jsonl as it is) with a task's verifier through the reward worker "
                       "pool; with 'audit', report the math verifier's false-negative and false-positive rates on "
                       "labelled rows (e.g. data/math_audit.jsonl); with 'hacks', the false-positive rate of every "
                       "built-in rule verifier per class of reward hack and its acceptance of legitimate answers; with "
                       "'judge-probe', an LLM judge's false-positive rate per class of master-key reply, defences off "
                       "and on (docs/rewards.md).")
    v.add_argument("paths", nargs="+", metavar="FILE", help="FILE.jsonl, 'audit' FILE.jsonl, 'hacks' or 'judge-probe'")
    v.add_argument("--task", help="a registered task whose verifier scores the rows (see `rlvr tasks`)")
    v.add_argument("--verifier", help="a reward function 'module:function' or 'file.py:function' instead of a task's")
    v.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="a keyword argument for the verifier, or judge-probe's judge setting (value read as YAML)")
    v.add_argument("--workers", type=int, default=2, help="reward worker processes")
    v.add_argument("--timeout", type=float, default=10.0, help="per-row wall-clock limit, seconds")
    v.add_argument("--json", action="store_true", help="machine-readable output")
    v.add_argument("--only", help="hacks: the verifiers to probe, comma-separated (default: every installed one)")
    v.add_argument("--problems", type=int, default=10, help="hacks: problems drawn per verifier")
    v.add_argument("--seed", type=int, default=0, help="hacks: seed of the problems drawn")
    v.add_argument("--strict", action="store_true", help="hacks: exit 1 when a hack is paid or a control refused; "
                   "judge-probe: when, with the defences on, a master-key class passes above 5%% or wrong answers "
                   "pass more than half as often as right ones")
    v.add_argument("--defences", default="off,on", help="judge-probe: 'off', 'on' or 'off,on' (default)")
    v.add_argument("--judge", help="judge-probe: the judge model (HF directory, hub name, .gguf or packaged name)")
    v.set_defaults(func=cmd_verify)
    sub.add_parser("tasks", help="list tasks and environments").set_defaults(func=cmd_tasks)
    sub.add_parser("algorithms", help="list estimators and losses").set_defaults(func=cmd_algorithms)
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse, taking `key=value` overrides wherever they stand (after options too: `rlvr train r.yaml --resume
    auto steps=1`)."""
    args, extra = parser.parse_known_args(argv)
    takes_overrides = isinstance(getattr(args, "overrides", None), list) and args.command != "verify"
    unknown = [a for a in extra if not (takes_overrides and "=" in a and not a.startswith("-"))]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if extra:
        args.overrides += extra
    # 'rlvr train optim.lr=1e-5' (no recipe): the first positional is an override, not a file.
    if getattr(args, "recipe", None) and "=" in args.recipe and not args.recipe.endswith((".yaml", ".yml")):
        args.overrides.insert(0, args.recipe)
        args.recipe = None
    return args


def main(argv: list[str] | None = None) -> int:
    from rlvr.training.interrupts import TrainingInterrupted

    args = parse_args(build_parser(), argv)
    try:
        code = args.func(args)
    except TrainingInterrupted as e:
        print(str(e), file=sys.stderr)
        return e.exit_code
    except RlvrError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("aborted (interrupted outside a training step, or a second time); nothing since the last checkpoint "
              "was saved", file=sys.stderr)
        return 130
    return code if isinstance(code, int) else 0
