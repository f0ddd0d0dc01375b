"""The Python API: rlvr.train from in-memory data, reward callables (plain, lambda, closure) and keyword
overrides; the README's example runs as written (and learns, marked slow)."""

from __future__ import annotations

import json
import re
import time

import pytest
from conftest import FAST, ROOT, merge

import rlvr
from rlvr.cli.main import main
from rlvr.errors import ConfigError, DataError, RlvrError

ROWS = [{"prompt": f"{a}+{b}=", "answer": str(a + b), "a": a} for a in range(5) for b in range(5)]


def tiny_config(tmp_path) -> dict:
    """The fast test settings (their arithmetic task is replaced by the rows given to rlvr.train)."""
    return merge(FAST, {"tracking": {"output_dir": str(tmp_path / "run")}})


def correct(prompt, completion, answer, **_):
    return float(completion.strip() == answer)


def test_train_from_rows_and_callables(tmp_path):
    bonus = 0.5

    def closure(prompt, completion, a, **_):  # uses a captured variable and a dataset column
        return bonus * (a + 1)

    result = rlvr.train("tiny", ROWS, [correct, lambda prompt, completion, **_: len(completion) / 10, closure],
                        eval_dataset=ROWS[:4], config=tiny_config(tmp_path), steps=2, **{"optim.lr": 2e-3},
                        rollout={"max_new_tokens": 3})
    assert result.run_dir == tmp_path / "run" and result.checkpoint.name == "step-0000002"
    assert [row["step"] for row in result.history()] == [1, 2]
    m = result.metrics
    for name in ("correct", "lambda", "closure"):
        assert m[f"reward/{name}/errors"] == m[f"reward/{name}/timeouts"] == m[f"reward/{name}/crashes"] == 0
    assert m["reward/closure/mean"] > 0 and m["reward/lambda/mean"] > 0
    assert m["optim/lr"] == 2e-3
    # The run is an ordinary run: its config names the data written beside it, and the callables by name.
    saved = (tmp_path / "run" / "config.yaml").read_text()
    assert str(tmp_path / "run" / "data" / "train.jsonl") in saved
    assert re.search(r"function: python:test_python_api\.test_train_from_rows_and_callables\.closure", saved)
    # `rlvr eval RUN` evaluates the newest checkpoint on the rows written beside it (verifier only).
    assert main(["eval", str(result.run_dir), "--num-problems", "4", "--output", str(tmp_path / "eval")]) == 0
    assert json.loads((tmp_path / "eval" / "eval.json").read_text())["problems"] == 4


def test_failing_and_hanging_callables_are_counted_and_stop_the_run_past_the_budget(tmp_path):
    def hangs(prompt, completion, **_):
        time.sleep(60)

    rewards = [correct, lambda prompt, completion, **_: 1 / 0, hangs]
    with pytest.raises(RlvrError, match="reward 'lambda' failed on every one of this step's 2 samples"):
        rlvr.train("tiny", ROWS, rewards, config=tiny_config(tmp_path / "a"), steps=1, data={"prompts_per_step": 1},
                   rollout={"samples_per_prompt": 2}, rewards={"timeout_s": 1, "num_workers": 2})
    # Told to tolerate failures, the run goes on and counts them; the failing callables score 0.
    result = rlvr.train("tiny", ROWS, rewards, config=tiny_config(tmp_path / "b"), steps=1,
                        data={"prompts_per_step": 1}, rollout={"samples_per_prompt": 2},
                        rewards={"timeout_s": 1, "num_workers": 2, "max_failure_rate": 1.0})
    m = result.metrics
    assert m["reward/lambda/errors"] == 2 and m["reward/hangs/timeouts"] == 2
    assert m["reward/lambda/mean"] == m["reward/hangs/mean"] == 0


def test_datasets_dataset_and_a_model_object(tmp_path):
    datasets = pytest.importorskip("datasets")
    from rlvr.config import TinyModelConfig
    from rlvr.models.loading import build_tiny_model, train_tokenizer

    tokenizer = train_tokenizer([f"{r['prompt']}{r['answer']}" for r in ROWS], 40)
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64),
                             tokenizer, 0)
    result = rlvr.train(model, datasets.Dataset.from_list(ROWS), [correct], tokenizer=tokenizer,
                        config=tiny_config(tmp_path), steps=1)
    assert result.checkpoint is not None and (tmp_path / "run" / "initial-model" / "config.json").is_file()


def test_api_mistakes_are_clear(tmp_path):
    with pytest.raises(ConfigError, match=r"Invalid override 'optim.lr=-1.0'"):
        rlvr.train("tiny", ROWS, [correct], config=tiny_config(tmp_path), **{"optim.lr": -1.0})
    with pytest.raises(ConfigError, match="in-memory dataset"):
        rlvr.train("tiny", "data.jsonl", [correct], config=tiny_config(tmp_path))
    with pytest.raises(DataError, match="train_dataset, row 2: column 'x' cannot be stored"):
        rlvr.train("tiny", [ROWS[0], {**ROWS[1], "x": object()}], [correct], config=tiny_config(tmp_path))
    with pytest.raises(ConfigError, match="needs its tokenizer object"):
        rlvr.train(object(), ROWS, [correct], config=tiny_config(tmp_path))


def readme_example() -> str:
    """The README's Python-API example, exactly as written there."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python API"):]
    return re.search(r"```python\n(.*?)```", section, re.S)[1]


@pytest.mark.slow
def test_readme_example_learns_like_the_quickstart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(readme_example(), "README.md", "exec"), scope)
    history = scope["result"].history()
    evals = [row["eval/accuracy"] for row in history if "eval/accuracy" in row]
    assert evals[-1] >= evals[0] + 0.2, evals
