"""`rlvr eval MODEL... --task T --samples N`: evaluate saved models on the same problems, compare them, and
write the report (rlvr.evaluation.report)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rlvr.errors import ConfigError


def parse_ks(text: str | None, samples: int) -> list[int]:
    """--k '1,4,16' -> [1, 4, 16]; default: powers of two up to N, and N itself."""
    if samples == 0:
        if text:
            raise ConfigError("--k needs --samples N (completions per problem) above 0.")
        return []
    if not text:
        return sorted({2**i for i in range(samples.bit_length()) if 2**i <= samples} | {samples})
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ConfigError(f"--k '{text}': write comma-separated integers, e.g. --k 1,2,4,8.") from None
    bad = [k for k in ks if not 1 <= k <= samples]
    if bad or not ks:
        raise ConfigError(f"--k values {bad or text} must lie between 1 and --samples {samples}.")
    return ks


def model_labels(paths: list[str], labels: str | None, given: list[str] | None = None) -> list[str]:
    """Names for the models: --labels, or each directory's name (with its parent's when names repeat); a GGUF model
    (`given` holds what the command line named) keeps the name it was given, not its cache directory's."""
    if labels:
        names = [name.strip() for name in labels.split(",")]
        if len(names) != len(paths) or len(set(names)) != len(names) or not all(names):
            raise ConfigError(f"--labels '{labels}': give {len(paths)} distinct comma-separated names, one per model.")
        return names
    from rlvr.models.gguf import gguf_path

    given = given or paths
    named = [Path(g).name if gguf_path(g) is not None else None for g in given]
    names = [n or Path(p).resolve().name for n, p in zip(named, paths)]
    if len(set(names)) < len(names):
        names = [n or f"{Path(p).resolve().parent.name}/{Path(p).resolve().name}" for n, p in zip(named, paths)]
    return names


def model_directory(path: str) -> Path:
    """A saved HF model directory (a checkpoint such as RUN/checkpoints/step-N, best, sft), a run directory's
    newest intact checkpoint, or a GGUF model (a .gguf file or a packaged model's name: its cached HF directory)."""
    from rlvr.models.gguf import gguf_path, resolve_model_name
    from rlvr.training.checkpoint import resolve_resume

    if gguf_path(path) is not None:
        return Path(resolve_model_name(path))
    p = Path(path)
    if (p / "config.json").is_file():
        return p
    if (p / "checkpoints").is_dir():
        found = resolve_resume("auto", p)
        if found is not None:
            return found
    raise ConfigError(f"Model '{path}' is not a saved HF model directory (no config.json), a run directory with "
                      "checkpoints nor a GGUF model; pass what a run saved, e.g. runs/quickstart/rl or "
                      "runs/quickstart/rl/checkpoints/step-0000500, a .gguf file, or smollm2-135m-instruct.")


def run_config(model_dir: str) -> Path | None:
    """The config.yaml of the run a model directory belongs to (RUN/, RUN/checkpoints/step-N, RUN/best), if any."""
    p = Path(model_dir).resolve()
    return next((d / "config.yaml" for d in (p, p.parent, p.parent.parent) if (d / "config.yaml").is_file()), None)


def run_eval_command(args) -> None:
    from rlvr.config import load_config
    from rlvr.evaluation.evaluate import eval_settings, evaluate_model
    from rlvr.evaluation.report import report_data, write_report
    from rlvr.watchdog import WATCH

    if args.samples < 0 or args.num_problems < 1:
        raise ConfigError("--samples must be >= 0 and --num-problems >= 1.")
    models = [str(model_directory(path)) for path in args.models]
    recipe = args.recipe
    if not (args.task or recipe or any(o.startswith("data.tasks=") for o in args.overrides)):
        recipe = run_config(models[0])
        if recipe is None:
            raise ConfigError(f"'{args.models[0]}' is not inside a run directory with a config.yaml, so name the task "
                              "with --task NAME (see `rlvr tasks`), or give a --recipe or --set 'data.tasks=[{name: "
                              "NAME, args: {...}}]' that lists tasks.")
        print(f"tasks, prompts and sampling from {recipe}")
    if args.keep_completions < 0:
        raise ConfigError(f"--keep-completions {args.keep_completions}: "
                          "the completions kept per problem cannot be negative (0 keeps none).")
    ks = parse_ks(args.k, args.samples)
    labels = model_labels(models, args.labels, args.models)
    overrides = [f"data.tasks=[{{name: {args.task}}}]"] if args.task else []
    cfg = load_config(recipe, [*overrides, *args.overrides])
    settings = replace(eval_settings(cfg), num_problems=args.num_problems, samples=args.samples, ks=ks,
                       token_entropy=args.samples > 0, keep_completions=args.keep_completions,
                       temperature=args.temperature if args.temperature is not None else cfg.rollout.temperature)
    if settings.temperature <= 0:
        raise ConfigError(f"--temperature {settings.temperature}: sampling needs a temperature above 0.")
    with WATCH.watch(cfg.tracking.stall_warning_s):
        runs = [(label, path, evaluate_model(cfg, path, settings, show_progress=True, label=label))
                for label, path in zip(labels, models)]
    task = ", ".join(t.name for t in cfg.data.tasks)
    data = report_data(task, settings, runs)
    print_summary(data)
    if args.output:
        for path in write_report(data, args.output):
            print(f"wrote {path}")


def print_summary(data: dict) -> None:
    table = Table(title=f"{data['task']}: {data['problems']} problems, {data['samples']} samples each")
    table.add_column("metric")
    for model in data["models"]:
        table.add_column(model["label"], justify="right")
    for name in data["models"][0]["metrics"]:
        cells = []
        for model in data["models"]:
            stats = model["metrics"][name]
            low, high = stats["ci95"]
            cells.append(f"{100 * stats['value']:.1f}% [{100 * low:.1f}, {100 * high:.1f}]")
        table.add_row(name, *cells)
    table.add_row("completions/s", *[f"{m['generation']['completions_per_s']:.3g}" for m in data["models"]])
    Console().print(table)
    for b in data["boundary"]:
        print(f"boundary at k={b['k']}: {len(b['only_a'])} problems solved only by {b['a']}, "
              f"{len(b['only_b'])} only by {b['b']}, {b['solved_by_both']} by both, {b['neither']} by neither")
