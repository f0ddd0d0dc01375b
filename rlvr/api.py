"""The Python API: train from Python objects, as TRL users do with GRPOTrainer.

    result = rlvr.train(model="Qwen/Qwen2.5-0.5B-Instruct", train_dataset=rows, reward_funcs=[f, lambda ...],
                        config="grpo", steps=50, **{"optim.lr": 1e-6})

Everything becomes an ordinary run: an in-memory dataset is written to <run>/data/*.jsonl and read by the
`dataset` task (so rows are checked like a file's and `rlvr eval RUN` finds them), a model object is saved to
<run>/initial-model, reward callables are shipped to the reward workers (rlvr.rewards.callables), and keyword
overrides are validated like command-line ones."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.config import RunConfig, build_config, callable_name, read_yaml, set_value
from rlvr.errors import ConfigError, DataError
from rlvr.tracking.jsonl import read_jsonl

Dataset = Iterable[Mapping[str, Any]]  # a list of dicts, a datasets.Dataset, ...


@dataclass
class TrainResult:
    """What a run leaves: the last step's metrics, its directory and its newest checkpoint."""

    metrics: dict[str, float]
    run_dir: Path
    checkpoint: Path | None

    def history(self) -> list[dict[str, Any]]:
        """Every logged row of metrics.jsonl (one per step, plus step 0's evaluation when there is one)."""
        path = self.run_dir / "metrics.jsonl"
        return read_jsonl(path)


def _base(config: RunConfig | str | Path | Mapping | None) -> dict:
    if config is None:
        return {}
    if isinstance(config, RunConfig):
        return config.model_dump(mode="python", exclude_unset=True)
    if isinstance(config, Mapping):
        return copy.deepcopy(dict(config))
    return read_yaml(config)  # a path, or a shipped recipe's name ('grpo', 'quickstart')


def write_rows(rows: Dataset, path: Path, what: str) -> list[str]:
    """Write `rows` as JSONL; returns the columns, in first-seen order."""
    if isinstance(rows, (str, Path)):
        raise ConfigError(f"{what} is an in-memory dataset (a list of dicts or a datasets.Dataset); to train on a "
                          f"file, set data.tasks=[{{name: dataset, args: {{path: {rows}}}}}] in the config instead.")
    path.parent.mkdir(parents=True, exist_ok=True)
    columns: dict[str, None] = {}
    with path.open("w") as f:
        for i, row in enumerate(rows, 1):
            if not isinstance(row, Mapping):
                raise DataError(f"{what}, row {i}: expected a mapping of column -> value, got {type(row).__name__}.")
            try:
                f.write(json.dumps(dict(row)) + "\n")
            except TypeError as e:
                bad = next((k for k, v in row.items() if not _jsonable(v)), "?")
                raise DataError(f"{what}, row {i}: column '{bad}' cannot be stored ({e}); use text, numbers, "
                                "lists and dicts.") from None
            columns.update(dict.fromkeys(row))
    if not columns:
        raise DataError(f"{what} has no rows.")
    return list(columns)


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except TypeError:
        return False
    return True


def _reward_entries(reward_funcs: Iterable) -> list[dict]:
    """rewards.functions entries: a callable, a 'module:function' / 'file.py:function' string, or a full entry
    (a dict with function, weight, name, args, batched). Callables are named after themselves (a lambda:
    'lambda'), numbered when a name repeats."""
    entries = []
    for f in reward_funcs:
        if callable(f) or isinstance(f, str):
            entries.append({"function": f})
        elif isinstance(f, Mapping):
            entries.append(dict(f))
        else:
            raise ConfigError(f"reward_funcs: {f!r} is not a callable, a 'module:function' string or a dict entry.")
    seen: dict[str, int] = {}
    for entry in entries:
        if callable(entry.get("function")) and not entry.get("name"):
            name = callable_name(entry["function"])
            seen[name] = seen.get(name, 0) + 1
            entry["name"] = name if seen[name] == 1 else f"{name}_{seen[name]}"
    return entries


def build_run(model: Any = None, train_dataset: Dataset | None = None, reward_funcs: Iterable | None = None, *,
              tokenizer: Any = None, eval_dataset: Dataset | None = None,
              config: RunConfig | str | Path | Mapping | None = None, prompt_column: str = "prompt",
              answer_column: str = "answer", output_dir: str | Path | None = None,
              **overrides: Any) -> RunConfig:
    """The RunConfig of `rlvr.train`'s arguments; writes the datasets (and a model object) into the run's
    directory."""
    data, origins = _base(config), {}
    for key, value in overrides.items():
        set_value(data, key, value, origins)
    if output_dir is not None:
        set_value(data, "tracking.output_dir", str(output_dir), origins)
    run_dir = Path(data.get("tracking", {}).get("output_dir") or RunConfig().tracking.output_dir).resolve()
    if isinstance(model, (str, Path)):
        set_value(data, "model.name", str(model), origins)
        if tokenizer is not None:
            if not isinstance(tokenizer, (str, Path)):
                raise ConfigError("tokenizer: with a model name, give the tokenizer's name or directory too (or "
                                  "pass the model object).")
            set_value(data, "model.tokenizer", str(tokenizer), origins)
    elif model is not None:
        if tokenizer is None or isinstance(tokenizer, (str, Path)):
            raise ConfigError("A model object needs its tokenizer object: rlvr.train(model=model, tokenizer=tokenizer, "
                              "...).")
        from rlvr.models.loading import save_pretrained

        save_pretrained(model, tokenizer, run_dir / "initial-model")
        set_value(data, "model.name", str(run_dir / "initial-model"), origins)
    if train_dataset is not None:
        from rlvr.tasks.base import RESERVED_FIELDS

        columns = write_rows(train_dataset, run_dir / "data" / "train.jsonl", "train_dataset")
        extra = [c for c in columns if c not in (prompt_column, answer_column, *RESERVED_FIELDS)]
        args = {"path": str(run_dir / "data" / "train.jsonl"), "prompt_column": prompt_column,
                "answer_column": answer_column, "extra_columns": extra}
        if eval_dataset is not None:
            write_rows(eval_dataset, run_dir / "data" / "eval.jsonl", "eval_dataset")
            args["eval_path"] = str(run_dir / "data" / "eval.jsonl")
        data.setdefault("data", {})["tasks"] = [{"name": "dataset", "args": args}]
    elif eval_dataset is not None:
        raise ConfigError("eval_dataset needs train_dataset (held-out rows of the same task).")
    if reward_funcs is not None:
        data.setdefault("rewards", {})["functions"] = _reward_entries(reward_funcs)
    return build_config(data, "rlvr.train arguments", origins)


def train(model: Any = None, train_dataset: Dataset | None = None, reward_funcs: Iterable[Callable | str] | None = None,
          *, resume: str | None = None, **kwargs: Any) -> TrainResult:
    """Train a policy with RL; returns the last step's metrics, the run directory and its newest checkpoint.

    model: a hub name, a local HF directory, 'tiny', or a model object (with `tokenizer=`); None: the config's.
    train_dataset / eval_dataset: rows (dicts) with a `prompt` column (text, or a list of {role, content}
    messages), an `answer` column (for the task's verifier, `accuracy`), and any other columns, all handed to
    the reward functions as keywords (except columns named like the call's own arguments: prompt, completion,
    completion_tokens, truncated, max_new_tokens, verifier_score); prompt_column= and answer_column= rename them.
    reward_funcs: callables f(prompt, completion, **columns) -> float (or dict with 'score'), lambdas and
    closures included, or 'module:function' strings; they run in the reward workers with rewards.timeout_s,
    and a failure scores 0 and is counted in reward/<name>/errors|timeouts|crashes.
    config: a RunConfig, a mapping, a recipe path or a shipped recipe's name; further keywords override it:
    steps=50, optim={"lr": 1e-6}, **{"rollout.max_new_tokens": 512}. output_dir= sets tracking.output_dir.
    resume: 'auto' or a checkpoint directory, as `rlvr train --resume`.
    """
    from rlvr.distributed import end_processes
    from rlvr.training.checkpoint import list_checkpoints
    from rlvr.training.trainer import Trainer

    cfg = build_run(model, train_dataset, reward_funcs, **kwargs)
    try:
        metrics = Trainer(cfg, resume=resume).fit()
    finally:
        end_processes()
    run_dir = Path(cfg.tracking.output_dir)
    checkpoints = list_checkpoints(run_dir / "checkpoints")
    return TrainResult(metrics, run_dir, checkpoints[-1] if checkpoints else None)


def sft(model: Any = None, train_dataset: Dataset | None = None, *, completion_column: str = "completion",
        **kwargs: Any) -> Path:
    """Supervised cold start on (prompt, completion) rows; returns the saved model directory (give it to
    `train(model=...)`). Takes train()'s model, tokenizer, config, prompt_column, output_dir and overrides."""
    from rlvr.training.sft import run_sft

    prompt_column = kwargs.pop("prompt_column", "prompt")
    cfg = build_run(model, None, None, **kwargs)
    if train_dataset is not None:
        path = Path(cfg.tracking.output_dir).resolve() / "data" / "sft.jsonl"
        write_rows(train_dataset, path, "train_dataset")
        cfg.sft.data_file = str(path)
        cfg.sft.prompt_column, cfg.sft.completion_column = prompt_column, completion_column
    return run_sft(cfg)
