"""Shared fixtures: tiny, fast run configurations built offline."""

from __future__ import annotations

import os
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from rlvr.config.yaml_io import dump_yaml

# Tiny models gain nothing from more threads, and one thread per process keeps the many processes a test
# starts (CLI runs, reward workers, data-parallel ranks) from oversubscribing the cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parent.parent
FAST = {
    "seed": 0,
    "steps": 4,
    "model": {"name": "tiny", "tiny": {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64,
                                       "vocab_size": 48}},
    "data": {"tasks": [{"name": "arithmetic", "args": {"max_operand": 9, "eval_size": 10}}], "prompts_per_step": 4},
    "rollout": {"samples_per_prompt": 4, "max_new_tokens": 4},
    "optim": {"lr": 1e-3, "micro_batch_size": 8},
    "rewards": {"num_workers": 1, "timeout_s": 5},
    "tracking": {"console": False, "tensorboard": "off", "report": False},
}


# Frames that only pass a call on: warnings' own, decorators, and torch's module dispatch (model(...) -> forward).
PLUMBING = ("warnings", "functools", "contextlib", "torch")


def called_from_rlvr(frame) -> bool:
    """Whether the deprecated API was called directly by rlvr's code: above the frame that raised the warning, skip
    that library's own frames and the plumbing; the first other frame is the caller. A library's internal use of
    another's deprecated API (peft reading a deprecated transformers property) is not rlvr's call."""
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "warnings":
        frame = frame.f_back
    origin = frame.f_globals.get("__name__", "").split(".")[0] if frame is not None else ""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.split(".")[0] not in (origin, *PLUMBING):
            return module == "rlvr" or module.startswith("rlvr.")
        frame = frame.f_back
    return False


@pytest.fixture(autouse=True)
def deprecations_from_rlvr_are_errors(monkeypatch):
    """A DeprecationWarning or FutureWarning raised by a call in rlvr's code fails the test, at the call, so a
    deprecation is seen the day it appears (pyproject's filterwarnings catches those attributed to rlvr itself; this
    catches the ones torch and transformers attribute to their own frames, e.g. a deprecated forward keyword)."""
    shown = warnings.showwarning

    def check(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, (DeprecationWarning, FutureWarning)) and called_from_rlvr(sys._getframe(1)):
            raise category(f"{message} (called from rlvr; use the replacement)")
        return shown(message, category, filename, lineno, file, line)

    monkeypatch.setattr(warnings, "showwarning", check)


class FakeClock:
    """Monotonic seconds that move only when a test says so (for the `clock` of the watchdog, notices, stop
    requests and their handler), so timing tests need no sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@pytest.fixture
def fast_config(tmp_path):
    """fast_config(**sections) -> a RunConfig dict with output under tmp_path."""

    def make(**extra) -> dict:
        return merge(merge(FAST, {"tracking": {"output_dir": str(tmp_path / "run")}}), extra)

    return make


@pytest.fixture
def write_recipe(tmp_path):
    def write(data: dict, name: str = "recipe.yaml") -> Path:
        path = tmp_path / name
        path.write_text(dump_yaml(data))
        return path

    return write


def assert_policy_runs_were_sampled(prompt: list[int], token_ids: list[int], policy_mask: list[bool],
                                    sampled: dict[tuple[int, ...], list[list[int]]]) -> None:
    """Every run of policy tokens in an episode is exactly what the engine sampled after the tokens before it
    (`sampled`: the engine's completions by the token sequence they continued)."""
    start = 0
    while start < len(token_ids):
        end = start
        while end < len(token_ids) and policy_mask[end] == policy_mask[start]:
            end += 1
        if policy_mask[start]:
            before = tuple(prompt + token_ids[:start])
            assert any(c[: end - start] == token_ids[start:end] for c in sampled[before]), (start, end)
        start = end


PROMPT = "I am thinking of a number from 1 to {high}. What is your guess?"  # the SmolLM2 recipes' opening


def guess_number_policy():
    """A tiny policy (eval mode) whose tokenizer knows the guessing game's words, with a ChatML template."""
    from rlvr.config import TinyModelConfig
    from rlvr.models.loading import build_tiny_model, train_tokenizer

    corpus = [f"I am thinking of a number from 1 to 20. What is your guess? {a} {a + 3} higher lower Reply with a "
              "number. user assistant" for a in range(20)]
    tok = train_tokenizer(corpus, 60)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.eos_token = "<|im_end|>"
    tok.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                         "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    torch.manual_seed(0)
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64), tok, 0)
    return model.eval(), tok


def assert_rollout_logprobs_match_a_full_forward(model, batch) -> None:
    """The logprobs recorded while sampling equal one forward over each whole episode at the policy's tokens, and
    environment tokens carry none (there are some)."""
    from rlvr.models.logprobs import completion_logprobs

    with torch.no_grad():
        logp, _ = completion_logprobs(model, batch.input_ids, batch.attention_mask, batch.completion_width, 1.0)
    mask = batch.completion_mask.bool()
    env_tokens = batch.attention_mask[:, -batch.completion_width :].bool() & ~mask
    assert env_tokens.any()
    assert torch.allclose(logp[mask], batch.rollout_logprobs[mask], atol=1e-4)
    assert (batch.rollout_logprobs[env_tokens] == 0).all()


def rlvr_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlvr", *args]


@pytest.fixture
def length_reward(tmp_path) -> str:
    """A reward with variance inside every group even for an untrained model: the completion's length."""
    path = tmp_path / "length_reward.py"
    path.write_text("def length(prompt, completion, **fields):\n    return float(len(completion))\n")
    return f"{path}:length"


@contextmanager
def local_ray_cluster(num_cpus: int):
    """A local Ray of `num_cpus` CPUs whose workers import this checkout's rlvr (tests that start Ray import it)."""
    import ray

    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), before]))
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before
