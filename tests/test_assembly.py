"""The one set-up path (rlvr.assembly) that training, evaluation and `rlvr verify` share: the reward pool is started
on what it loads and waited for before the first item is scored, a function that fails to load stops each of them
with the same message, and a pool nobody started refuses to score."""

import json
from pathlib import Path

import pytest

from rlvr.config import build_config
from rlvr.evaluation.evaluate import eval_settings, evaluate_model
from rlvr.rewards.failures import RewardLoadError
from rlvr.rewards.pool import RewardPool, RewardRequest
from rlvr.training.trainer import Trainer

# Imports in the parent (so the start-up check passes) but not in a reward worker: as a judge whose weights the
# worker cannot load.
FAILS_IN_WORKERS = """import sys
if getattr(sys.modules["__main__"].__spec__, "name", "") == "rlvr.rewards.worker":
    raise RuntimeError("weights not found on this worker")


def score(prompt, completion, **fields):
    return float(completion.strip() == str(fields.get("answer")))
"""


def rows_file(path: Path, completions: bool = False) -> str:
    """Sums as a dataset (prompt, answer) or, with `completions`, as completions to verify."""
    path.write_text("".join(json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b),
                                        **({"completion": str(a * b)} if completions else {})}) + "\n"
                            for a in range(4) for b in range(4)))
    return str(path)


def test_a_pool_nobody_started_refuses_to_score_or_wait_instead_of_starting_itself():
    with RewardPool(num_workers=1, timeout_s=1.0) as pool:
        with pytest.raises(RuntimeError, match=r"reward pool was not started: call start\(loads\) first"):
            pool.score([RewardRequest(0, "rlvr.tasks.dataset:exact_match", "p", "c", {"answer": "c"})])
        with pytest.raises(RuntimeError, match="reward pool was not started"):
            pool.wait_ready()
        assert pool.counts()["reward_pool/restarts"] == 0


def test_verify_has_its_verifier_loaded_in_every_worker_before_the_first_item(tmp_path, monkeypatch, capsys):
    from rlvr.cli.main import main

    verifier = tmp_path / "verifier.py"
    verifier.write_text("def score(prompt, completion, **fields):\n    return float(completion == fields['answer'])\n")
    seen = []
    score = RewardPool.score

    def watched(self, requests):
        seen.append(([w.ready for w in self._workers], dict(self.load_s)))
        return score(self, requests)

    monkeypatch.setattr(RewardPool, "score", watched)
    path = rows_file(tmp_path / "rows.jsonl", completions=True)
    assert main(["verify", "--verifier", f"{verifier}:score", path, "--json", "--workers", "2"]) == 0
    ready, loaded = seen[0]
    assert ready == [True, True] and list(loaded) == [f"{verifier}:score"]
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["rows"] == 16 and summary["failed"] == 0 and summary["mean"] == 2 / 16  # 0*0 == 0+0, 2*2 == 2+2


def test_a_verifier_that_fails_to_load_stops_training_evaluation_and_verify_alike(fast_config, tmp_path, capsys):
    from rlvr.cli.main import main

    broken = tmp_path / "broken.py"
    broken.write_text(FAILS_IN_WORKERS)
    path = rows_file(tmp_path / "rows.jsonl")
    cfg = build_config(fast_config(data={"tasks": [{"name": "dataset", "args": {
        "path": path, "eval_size": 4, "verifier": f"{broken}:score"}}]}))
    trainer = Trainer(cfg)
    with pytest.raises(RewardLoadError) as trained:
        trainer.fit()
    with pytest.raises(RewardLoadError) as evaluated:
        evaluate_model(cfg, str(Path(cfg.tracking.output_dir) / "initial-model"), eval_settings(cfg))
    assert str(evaluated.value) == str(trained.value)
    assert "failed to load in a reward worker: " in str(trained.value)
    assert "RuntimeError: weights not found on this worker" in str(trained.value)
    completions = rows_file(tmp_path / "completions.jsonl", completions=True)
    assert main(["verify", "--verifier", f"{broken}:score", completions, "--workers", "1"]) == 2
    said = capsys.readouterr().err
    cause = str(trained.value).split("failed to load in a reward worker: ")[1]
    assert said.startswith("error: reward ") and f"failed to load in a reward worker: {cause}" in said
