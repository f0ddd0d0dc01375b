import json

import pytest

from rlvr.errors import ConfigError
from rlvr.tasks import make_task
from rlvr.tasks.arithmetic import score as arithmetic_score
from rlvr.tasks.reasoning_gym import score as rg_score


def test_arithmetic_problems_are_deterministic_and_never_held_out():
    task = make_task("arithmetic", 3, {"max_operand": 9, "eval_size": 30})
    held_out = {task.problem("eval", i).prompt for i in range(30)}
    train = [task.problem("train", i) for i in range(300)]
    assert not held_out & {p.prompt for p in train}
    assert [p.prompt for p in train[:5]] == [task.problem("train", i).prompt for i in range(5)]
    p = train[0]
    a, b = p.prompt.rstrip("=").split("+")
    assert p.answer == str(int(a) + int(b))


def test_arithmetic_held_out_set_is_shared_across_seeds_and_train_streams_differ():
    t0, t1 = make_task("arithmetic", 0, {}), make_task("arithmetic", 1, {})
    assert [t0.problem("eval", i).prompt for i in range(10)] == [t1.problem("eval", i).prompt for i in range(10)]
    assert [t0.problem("train", i).prompt for i in range(10)] != [t1.problem("train", i).prompt for i in range(10)]


def test_arithmetic_verifier():
    assert arithmetic_score("2+3=", "5", answer="5") == 1.0
    assert arithmetic_score("2+3=", " 5 and more", answer="5") == 1.0
    assert arithmetic_score("2+3=", "55", answer="5") == 0.0
    assert arithmetic_score("2+3=", "", answer="5") == 0.0


def test_mixed_digits_draws_short_and_long_operands():
    task = make_task("arithmetic", 0, {"max_operand": 99, "mixed_digits": True})
    operands = [int(x) for i in range(400) for x in task.problem("train", i).prompt.rstrip("=").split("+")]
    short = sum(x < 10 for x in operands) / len(operands)
    assert 0.4 < short < 0.6  # uniform over 1 and 2 digits, not over values (which would give ~10%)


def test_reasoning_gym_uses_its_scorer_without_substring_credit():
    task = make_task("reasoning_gym", 0, {"dataset": "basic_arithmetic", "eval_size": 5})
    p = task.problem("train", 0)
    assert "<answer>" in p.prompt
    fields = p.reward_fields()
    assert rg_score(p.prompt, f"thinking... <answer>{p.answer}</answer>", **fields) == 1.0
    # The base class would pay len(answer)/len(text) for text that merely contains the answer.
    assert rg_score(p.prompt, f"<answer>{p.answer} or 12345</answer>", **fields) == 0.0
    assert rg_score(p.prompt, "no tags at all", **fields) == 0.0
    assert task.problem("eval", 0).prompt != p.prompt


def test_reasoning_gym_unknown_dataset_suggests_nearest():
    with pytest.raises(ConfigError, match="Did you mean 'basic_arithmetic'"):
        make_task("reasoning_gym", 0, {"dataset": "basic_arithmatic"})


def test_dataset_task_reads_jsonl_with_column_mapping(tmp_path):
    path = tmp_path / "qa.jsonl"
    rows = [{"question": f"{i}*2=", "target": str(2 * i), "level": i % 3} for i in range(10)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = make_task("dataset", 0, {"path": str(path), "prompt_column": "question", "answer_column": "target",
                                    "eval_size": 2, "extra_columns": ["level"]})
    assert task.size("train") == 8 and task.size("eval") == 2
    p = task.problem("eval", 1)
    assert (p.prompt, p.answer, p.fields) == ("9*2=", "18", {"level": 0})
