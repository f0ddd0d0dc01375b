import json
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from rlvr.cli.main import main
from rlvr.config import build_config
from rlvr.errors import ConfigError
from rlvr.rewards.failures import FailureBudget, RewardFailure, RewardTimeoutLoop
from rlvr.rewards.pool import RewardLoad, RewardPool, RewardRequest
from rlvr.tasks import make_task
from rlvr.training.trainer import Trainer

FLAKY = textwrap.dedent(
    """
    import os, time

    def raises(prompt, completion, **fields):
        raise RuntimeError("boom")

    def hangs_on_odd(prompt, completion, answer, **fields):
        if int(answer) % 2:
            time.sleep(60)
        return 1.0

    def crashes_on_seven(prompt, completion, answer, **fields):
        if answer == "7":
            os._exit(3)
        return 0.5

    def with_extras(prompt, completion, **fields):
        return {"score": 0.25, "length": float(len(completion))}

    def not_a_number(prompt, completion, **fields):
        return "yes"

    def nan(prompt, completion, **fields):
        return float("nan")

    def infinite(prompt, completion, **fields):
        return float("inf")

    def nothing(prompt, completion, **fields):
        return None

    def fails_on_sevens(prompt, completion, answer, **fields):
        if "7" in answer:
            raise ValueError("seven")
        return 1.0

    def crashes_once(prompt, completion, marker, **fields):
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(3)
        return 1.0

    def group_rank(prompts, completions, verifier_score, completion_tokens, **fields):
        # batched: each sample's rank of length within its group, plus what it was handed
        order = sorted(range(len(completions)), key=lambda i: (completion_tokens[i], i))
        return [{"score": float(order.index(i)), "group_size": float(len(prompts)),
                 "verdict": float(verifier_score[i])} for i in range(len(completions))]

    def batched_wrong_length(prompts, completions, **fields):
        return [1.0]

    LEAK = []

    def leaks(prompt, completion, **fields):
        LEAK.append(bytearray(40 << 20))  # 40 MB kept for good on every call
        return float(len(LEAK))
    """
)


@pytest.fixture
def reward_file(tmp_path):
    path = tmp_path / "flaky.py"
    path.write_text(FLAKY)
    return path


def requests(spec, answers):
    return [RewardRequest(i, spec, "p", "c", {"answer": a}) for i, a in enumerate(answers)]


def test_pool_scores_errors_timeouts_and_crashes_and_keeps_going(reward_file):
    with RewardPool(num_workers=2, timeout_s=1.0) as pool:
        pool.start()
        out = pool.score(requests(f"{reward_file}:hangs_on_odd", ["2", "3", "4", "6"]))
        assert [out[i].status for i in range(4)] == ["ok", "timeout", "ok", "ok"]
        assert out[0].value == 1.0 and out[1].value == 0.0
        out = pool.score(requests(f"{reward_file}:crashes_on_seven", ["1", "7", "8"]))
        assert [out[i].status for i in range(3)] == ["ok", "crash", "ok"]
        assert out[2].value == 0.5
        out = pool.score(requests(f"{reward_file}:raises", ["1"]))
        assert out[0].status == "error" and "boom" in out[0].message
        out = pool.score(requests(f"{reward_file}:not_a_number", ["1"]))
        assert out[0].status == "error" and "must be a number" in out[0].message
        out = pool.score(requests(f"{reward_file}:with_extras", ["1"]))
        assert out[0].value == 0.25 and out[0].extras == {"length": 1.0}
        assert pool.restarts == 4 and pool.retries == 2  # each timeout/crash is retried once on a fresh worker


def test_an_item_that_kills_its_worker_once_is_retried_and_scored(reward_file, tmp_path):
    with RewardPool(num_workers=1, timeout_s=5.0) as pool:
        pool.start()
        reqs = [RewardRequest(i, f"{reward_file}:crashes_once", "p", "c", {"marker": str(tmp_path / f"m{i}")})
                for i in range(3)]
        out = pool.score(reqs)
        assert [(out[i].status, out[i].value) for i in range(3)] == [("ok", 1.0)] * 3
        assert pool.retries == 3 and pool.restarts == 3


def test_a_worker_that_leaks_memory_is_replaced_between_chunks_and_nothing_is_lost(reward_file):
    with RewardPool(num_workers=1, timeout_s=10.0, chunk_size=1, max_memory_mb=150) as pool:
        pool.start()
        out = pool.score([RewardRequest(i, f"{reward_file}:leaks", "p", "c") for i in range(8)])
    assert all(out[i].status == "ok" for i in range(8))
    # a fresh worker starts its leak over: no worker ever held more than 3 leaked blocks (~150 MB)
    assert max(out[i].value for i in range(8)) <= 4 and pool.recycled >= 2 and pool.restarts == 0


def test_a_memory_limit_below_a_fresh_worker_stops_with_the_setting_instead_of_replacing_forever(reward_file):
    start = time.monotonic()
    with RewardPool(num_workers=1, timeout_s=10.0, max_memory_mb=1) as pool:
        pool.start()
        with pytest.raises(ConfigError, match=r"holds \d+ MB right after loading.*rewards.worker_max_memory_mb=1 MB"):
            pool.score([RewardRequest(0, f"{reward_file}:leaks", "p", "c")])
        assert pool.recycled == 0
    assert time.monotonic() - start < 60


def test_batched_rewards_get_lists_and_must_return_one_reward_per_completion(reward_file):
    fields = {"verifier_score": [1.0, 0.0, 1.0], "completion_tokens": [9, 3, 5]}
    with RewardPool(num_workers=1, timeout_s=5.0) as pool:
        pool.start()
        out = pool.score([RewardRequest("g", f"{reward_file}:group_rank", ["p"] * 3, ["a", "b", "c"], fields,
                                        batched=True),
                          RewardRequest("w", f"{reward_file}:batched_wrong_length", ["p"] * 2, ["a", "b"], {},
                                        batched=True)])
    assert out["g"].status == "ok" and out["g"].value == [2.0, 0.0, 1.0]
    assert [e["verdict"] for e in out["g"].extras] == [1.0, 0.0, 1.0]
    assert out["w"].status == "error" and "list of 2 rewards" in out["w"].message


def test_batched_reward_is_called_once_per_group_after_the_verifier(fast_config, reward_file):
    cfg = build_config(fast_config(
        steps=1,
        rewards={"max_failure_rate": 1.0,  # batched_wrong_length fails every time: counted, not stopping this run
                 "functions": [{"function": "task"},
                               {"function": f"{reward_file}:group_rank", "weight": 0.0, "batched": True},
                               {"function": f"{reward_file}:batched_wrong_length", "batched": True}]},
        data={"prompts_per_step": 3}, rollout={"samples_per_prompt": 4},
    ))
    trainer = Trainer(cfg)
    batch, metrics = trainer.rollout()
    trainer.pool.close()
    # ranks 0..3 within every group of 4 -> mean 1.5; the group size handed over is 4; the verdicts are the verifier's
    assert metrics["reward/group_rank/mean"] == 1.5 and metrics["reward/group_rank/group_size"] == 4.0
    assert metrics["reward/group_rank/verdict"] == pytest.approx(metrics["accuracy"])
    # a failing batched call fails its whole group, counted in samples
    assert metrics["reward/batched_wrong_length/errors"] == 12


def test_training_survives_rewards_that_raise_hang_or_crash_when_told_to_tolerate_them(fast_config, reward_file):
    cfg = build_config(fast_config(
        steps=2,
        rewards={"timeout_s": 1.0, "max_failure_rate": 1.0, "functions": [
            {"function": "task"},
            {"function": f"{reward_file}:raises", "weight": 0.5},
            {"function": f"{reward_file}:hangs_on_odd", "weight": 0.1},
            {"function": f"{reward_file}:crashes_on_seven", "weight": 0.1},
        ]},
        data={"tasks": [{"name": "arithmetic", "args": {"max_operand": 5, "eval_size": 4}}], "prompts_per_step": 2},
        rollout={"samples_per_prompt": 2},
    ))
    Trainer(cfg).fit()
    rows = [json.loads(line) for line in open(f"{cfg.tracking.output_dir}/metrics.jsonl")]
    assert [r["step"] for r in rows] == [1, 2]
    task = make_task("arithmetic", 0, {"max_operand": 5, "eval_size": 4})
    for r in rows:
        answers = [task.problem("train", 2 * (r["step"] - 1) + i).answer for i in range(2)]
        odd = 2 * sum(int(a) % 2 for a in answers)  # 2 samples per prompt
        sevens = 2 * answers.count("7")
        assert r["reward/raises/errors"] == 4 and r["reward/raises/mean"] == 0.0
        assert r["reward/hangs_on_odd/timeouts"] == odd
        assert r["reward/hangs_on_odd/mean"] == pytest.approx((4 - odd) / 4)
        assert r["reward/crashes_on_seven/crashes"] == sevens
        assert r["reward/verifier/errors"] == 0 and r["reward/verifier/timeouts"] == 0


@pytest.mark.parametrize("name", ["not_a_number", "nan", "infinite", "nothing", "raises"])
def test_nan_inf_none_strings_and_exceptions_are_failures(reward_file, name):
    with RewardPool(num_workers=1, timeout_s=5.0) as pool:
        pool.start()
        outcome = pool.score(requests(f"{reward_file}:{name}", ["1"]))[0]
    assert outcome.status == "error" and outcome.value == 0.0 and outcome.message


def test_the_failure_budget_tolerates_rare_failures_and_stops_frequent_ones():
    budget = FailureBudget(max_failure_rate=0.1, window=100)
    for _ in range(10):  # 1 failure in 10 per step: 10%, not above the budget
        budget.record(10, {"verifier": Counter(), "flaky": Counter(timeout=1)}, {"flaky": "timeout: 5 s"})
    assert budget.summary() == "reward failures: verifier 0/100; flaky 10/100 (timeout 10)"
    with pytest.raises(RewardFailure, match=r"reward 'flaky' failed on 12 of its last 100 samples \(12%\).*"
                                            r"First error: timeout: 5 s"):
        budget.record(10, {"verifier": Counter(), "flaky": Counter(error=3)}, {"flaky": "error: boom"})
    with pytest.raises(RewardFailure, match="every one of this step's 8 samples"):
        FailureBudget(0.1, 256).record(8, {"broken": Counter(error=8)}, {"broken": "error: ValueError: x"})
    FailureBudget(1.0, 256).record(8, {"broken": Counter(error=8)}, {})  # 1: tolerate everything
    early = FailureBudget(0.1, 256)
    early.record(8, {"flaky": Counter(error=2)}, {})  # 25% of 8 samples: too few to judge yet


@pytest.mark.parametrize("name", ["raises", "not_a_number", "nan"])
def test_a_reward_failing_on_every_sample_stops_the_run_with_a_non_zero_exit(write_recipe, fast_config, reward_file,
                                                                              name, capsys):
    recipe = write_recipe(fast_config(steps=3, rewards={"functions": [
        {"function": "task"}, {"function": f"{reward_file}:{name}", "weight": 1.0}]}))
    assert main(["train", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert f"reward '{name}' failed on every one of this step's" in err and "First error: error:" in err
    assert "rewards.max_failure_rate" in err
    metrics = Path(fast_config()["tracking"]["output_dir"]) / "metrics.jsonl"
    assert not metrics.exists() or metrics.read_text() == ""  # stopped at the first step, nothing trained on


def test_a_run_prints_failure_counts_per_reward_at_the_end(fast_config, reward_file, capsys):
    cfg = build_config(fast_config(steps=2, rewards={"max_failure_rate": 0.9, "functions": [
        {"function": "task"}, {"function": f"{reward_file}:fails_on_sevens", "weight": 0.1}]},
        data={"tasks": [{"name": "arithmetic", "args": {"max_operand": 9, "eval_size": 4}}], "prompts_per_step": 2},
        rollout={"samples_per_prompt": 2}, tracking={"console": True}))
    Trainer(cfg).fit()
    captured = capsys.readouterr()
    lines = [line.strip() for line in (captured.out + captured.err).splitlines()]
    assert any(line.startswith("reward failures") and "verifier 0/8; fails_on_sevens " in line for line in lines)


def test_a_misspelled_task_verifier_is_a_start_up_error_with_a_suggestion(write_recipe, fast_config, tmp_path,
                                                                          capsys):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": f"{i}+1=", "answer": str(i + 1)}) + "\n" for i in range(8)))
    recipe = write_recipe(fast_config(data={"tasks": [{"name": "dataset", "args": {
        "path": str(rows), "verifier": "rlvr.verifiers.math:math_scor"}}]}))
    assert main(["train", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "the verifier of task 'dataset' = 'rlvr.verifiers.math:math_scor'" in err
    assert "Did you mean 'math_score'" in err
    assert not (Path(fast_config()["tracking"]["output_dir"]) / "initial-model").exists()  # before any compute


def test_a_reward_worker_starts_without_torch_or_transformers():
    """A worker (started per pool and again for every one replaced after a hang or crash) imports what scoring a
    rule reward needs, not the seconds of torch and transformers; a model-backed reward imports them when called."""
    code = ("import sys, rlvr.rewards.worker, rlvr.rewards.loading as l; "
            "print(float(l.resolve_function('rlvr.tasks.arithmetic:score')('96+16=', '112', answer='112')), "
            "sorted({'torch', 'transformers'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "1.0 []"  # scored, and neither library loaded


SLOW_IMPORT = textwrap.dedent(
    """
    import time
    time.sleep({sleep})  # a heavy import (torch, a tokenizer, a model) on a cold machine

    def length(prompt, completion, **fields):
        return float(len(completion))
    """
)


def test_loading_is_not_scoring_a_slow_import_never_counts_against_an_item(tmp_path):
    """A reward whose module takes three times the item limit to import: loaded before the worker reports ready (and
    a function first met in a request is loaded before its item's clock starts), so no item times out."""
    (tmp_path / "slow.py").write_text(SLOW_IMPORT.format(sleep=3.0))
    (tmp_path / "late.py").write_text(SLOW_IMPORT.format(sleep=3.0))
    with RewardPool(num_workers=1, timeout_s=1.0) as pool:
        pool.start([RewardLoad(f"{tmp_path}/slow.py:length", label="slow")])
        loaded = pool.wait_ready()
        assert list(loaded) == ["slow"] and loaded["slow"] >= 3.0
        out = pool.score(requests(f"{tmp_path}/slow.py:length", ["1", "2"])
                         + [RewardRequest(9, f"{tmp_path}/late.py:length", "p", "abc", label="late")])
        assert [out[k].status for k in (0, 1, 9)] == ["ok", "ok", "ok"] and out[9].value == 3.0
        assert pool.timeouts == pool.restarts == 0 and pool.load_s["late"] >= 3.0


def test_a_reward_that_fails_to_import_stops_at_start_naming_the_file_line_and_exception(tmp_path):
    (tmp_path / "broken.py").write_text("import os\n\nvalue = undefined_name + 1\n\ndef f(prompt, completion, **_):\n"
                                        "    return 1.0\n")
    with RewardPool(num_workers=2, timeout_s=1.0) as pool:
        pool.start([RewardLoad(f"{tmp_path}/broken.py:f", label="'f' (broken.py:f)")])
        with pytest.raises(RewardFailure, match=r"'f' \(broken.py:f\) failed to load in a reward worker: .*NameError: "
                                                r"name 'undefined_name' is not defined \(at .*broken.py line 3\)"):
            pool.wait_ready()


def test_loading_longer_than_its_own_limit_stops_with_the_setting_to_change(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW_IMPORT.format(sleep=300))
    with RewardPool(num_workers=1, timeout_s=1.0, load_timeout_s=10.0) as pool:
        pool.start([RewardLoad(f"{tmp_path}/slow.py:length", label="slow")])
        t = time.monotonic()
        # (on a loaded machine the worker's own start-up may be what overruns: it counts as loading too)
        with pytest.raises(RewardFailure, match=r"did not finish loading (slow|the reward worker \(starting Python\)) "
                                                r"within rewards.load_timeout_s=10 s. Raise rewards.load_timeout_s"):
            pool.wait_ready()
        assert time.monotonic() - t < 30


def test_items_that_keep_timing_out_stop_the_pool_naming_the_reward_limit_and_times(reward_file):
    with RewardPool(num_workers=2, timeout_s=1.0, max_timeouts_in_a_row=3) as pool:
        pool.start()
        t = time.monotonic()
        with pytest.raises(RewardTimeoutLoop) as caught:
            pool.score(requests(f"{reward_file}:hangs_on_odd", ["1", "3", "5", "7", "9", "11", "13", "15"]))
        assert time.monotonic() - t < 30  # not 8 items x 2 attempts x 1 s, let alone for ever
    message = str(caught.value)
    assert "flaky.py:hangs_on_odd" in message and "3 items in a row timed out at rewards.timeout_s=1 s" in message
    assert "none of its items has finished yet" in message and "Raise rewards.timeout_s" in message
    # one item that finishes in between starts the count again: 2 hangs, a finished item, 2 hangs never stop it
    with RewardPool(num_workers=1, timeout_s=1.0, max_timeouts_in_a_row=3) as pool:
        pool.start()
        out = pool.score(requests(f"{reward_file}:hangs_on_odd", ["1", "3", "2", "5", "7"]))
    assert [out[i].status for i in range(5)] == ["timeout", "timeout", "ok", "timeout", "timeout"]


QUIET_EXIT = textwrap.dedent(
    """
    import os, sys, threading, time
    from rlvr.rewards.failures import PoolClosed
    from rlvr.rewards.pool import RewardLoad, RewardPool, RewardRequest

    def score(pool, requests):
        try:
            pool.score(requests)
        except PoolClosed:  # what a scoring that waited on a closed pool meets
            pass

    spec, how = sys.argv[1], sys.argv[2]
    pool = RewardPool(num_workers=2, timeout_s=30.0)
    pool.start([RewardLoad(spec)])
    pool.wait_ready()
    requests = [RewardRequest(i, spec, "p", "c", {"seconds": 0.2}) for i in range(40)]
    threading.Thread(target=score, args=(pool, requests), daemon=True).start()
    time.sleep(1.0)  # mid-work: both workers busy, results unread
    if how == "close":
        pool.close()
    else:  # the trainer dies: its end of every pipe closes with the workers' messages unread
        os._exit(0)
    """
)


@pytest.mark.parametrize("how", ["close", "die"])
def test_a_worker_whose_pool_closed_or_died_mid_work_exits_without_a_traceback(tmp_path, how):
    reward = tmp_path / "slow.py"
    reward.write_text("import time\n\ndef slow(prompt, completion, seconds, **fields):\n    time.sleep(seconds)\n"
                      "    return 1.0\n")
    script = tmp_path / "pool.py"
    script.write_text(QUIET_EXIT)
    # stderr is shared with the workers, so it is read to its end only once every worker has exited
    done = subprocess.run([sys.executable, str(script), f"{reward}:slow", how], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr
