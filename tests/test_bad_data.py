"""Bad data: unusable rows stop the run up front naming file and line (data.bad_rows=error), or are dropped
and counted (skip); a misnamed column is always an error naming file, row, column and the columns found."""

from __future__ import annotations

import json

import pytest

from rlvr.errors import ConfigError, DataError
from rlvr.models.loading import train_tokenizer
from rlvr.models.prompts import PromptEncoder, prompt_token_limit
from rlvr.tasks import make_task
from rlvr.tasks.dataset import read_rows

GOOD = [{"prompt": f"{i}+1=", "answer": str(i + 1)} for i in range(3)]


@pytest.fixture
def hostile_jsonl(tmp_path):
    """Good rows on lines 1, 8 and 10; every other line is unusable in its own way (line 9 is blank)."""
    lines = [
        json.dumps(GOOD[0]).encode(),
        b'{"prompt": "2+2=", "answer": ',  # 2: malformed JSON
        b'["a list", "not an object"]',  # 3: not an object
        '{"prompt": "caf\u00e9", "answer": "1"}'.encode("latin-1"),  # 4: not UTF-8
        json.dumps({"prompt": "3+3="}).encode(),  # 5: missing answer
        json.dumps({"prompt": "   ", "answer": "0"}).encode(),  # 6: empty prompt
        json.dumps({"prompt": "4+4=", "answer": None}).encode(),  # 7: null answer
        json.dumps(GOOD[1]).encode(),
        b"",
        json.dumps(GOOD[2]).encode(),
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_error_policy_names_the_first_bad_line(hostile_jsonl):
    with pytest.raises(DataError) as err:
        make_task("dataset", 0, {"path": str(hostile_jsonl)})
    assert f"{hostile_jsonl}, line 2: not valid JSON" in str(err.value)
    assert "data.bad_rows=skip" in str(err.value)


def test_skip_policy_keeps_good_rows_and_counts_each_bad_line(hostile_jsonl):
    task = make_task("dataset", 0, {"path": str(hostile_jsonl)}, bad_rows="skip")
    assert [task.problem("train", i).prompt for i in range(task.size("train"))] == [r["prompt"] for r in GOOD]
    reasons = dict(row.split(": ", 1) for row in (r.removeprefix(f"{hostile_jsonl}, ") for r in task.skipped_rows))
    assert list(reasons) == [f"line {n}" for n in range(2, 8)]
    assert reasons["line 2"].startswith("not valid JSON")
    assert reasons["line 3"] == "expected a JSON object, got list"
    assert reasons["line 4"].startswith("not valid UTF-8 (byte 0xe9")
    assert reasons["line 5"].startswith("column 'answer' (answer) is missing. Columns found: prompt.")
    assert reasons["line 6"].startswith("column 'prompt' (prompt) is empty")
    assert reasons["line 7"].startswith("column 'answer' (answer) is null")


def test_task_args_can_override_the_run_policy(hostile_jsonl):
    task = make_task("dataset", 0, {"path": str(hostile_jsonl), "bad_rows": "skip"}, bad_rows="error")
    assert task.size("train") == 3


def test_misnamed_column_names_file_row_column_and_columns_found_even_when_skipping(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps({"promt": f"{i}+1=", "answer": "x", "level": 1}) + "\n" for i in range(3)))
    with pytest.raises(DataError) as err:
        make_task("dataset", 0, {"path": str(path)}, bad_rows="skip")
    msg = str(err.value)
    assert f"{path}, line 1: column 'prompt' (prompt) is missing, and no other row" in msg
    assert "Did you mean 'promt'?" in msg and "Columns found: answer, level, promt." in msg
    assert "data.tasks[].args.prompt_column=NAME" in msg


def test_misnamed_extra_column_points_at_extra_columns(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps({"prompt": "1+1=", "answer": "2", "difficulty": 3}) + "\n")
    with pytest.raises(DataError, match=r"column 'dificulty' \(extra\).*Did you mean 'difficulty'.*extra_columns"):
        make_task("dataset", 0, {"path": str(path), "extra_columns": ["dificulty"]})


def test_csv_with_bad_bytes_and_ragged_rows(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_bytes(b"prompt,answer\n1+1=,2\n\xff\xfe=,3\n2+2=,4,extra\n3+3=,6\n")
    with pytest.raises(DataError, match=r"qa\.csv, line 3: not valid UTF-8"):
        make_task("dataset", 0, {"path": str(path)})
    task = make_task("dataset", 0, {"path": str(path)}, bad_rows="skip")
    assert task.size("train") == 2
    assert task.skipped_rows == [f"{path}, line 3: not valid UTF-8", f"{path}, line 4: has 1 more fields than the header"]


def test_json_file_errors_name_the_line(tmp_path):
    path = tmp_path / "qa.json"
    path.write_text('[{"prompt": "1+1=", "answer": "2"},\n {"prompt": oops}]')
    with pytest.raises(DataError, match=r"qa\.json, line 2: not valid JSON"):
        make_task("dataset", 0, {"path": str(path)})
    path.write_bytes(b'[{"prompt": "1+1=",\n "answer": "\xff"}]')
    with pytest.raises(DataError, match=r"qa\.json, line 2: not valid UTF-8"):
        make_task("dataset", 0, {"path": str(path)})


def test_read_rows_reports_non_utf8_as_a_data_error(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"completion": "ok"}\n{"completion": "\xff"}\n')
    with pytest.raises(DataError, match=r"rows\.jsonl, line 2: not valid UTF-8"):
        read_rows(path)


def test_a_file_with_only_bad_rows_says_so(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "", "answer": "1"}\n{"prompt": "x"}\n')
    with pytest.raises(DataError, match="no usable rows; all 2 were skipped"):
        make_task("dataset", 0, {"path": str(path)}, bad_rows="skip")


def test_screening_applies_the_policy_to_over_long_prompts(tmp_path):
    path = tmp_path / "qa.jsonl"
    rows = [{"prompt": "1+1=", "answer": "2"}, {"prompt": "1+" * 40 + "1=", "answer": "41"}, {"prompt": "2+2=", "answer": "4"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    encode = PromptEncoder(train_tokenizer(["1+1=2"], 20), "never", max_tokens=10)
    task = make_task("dataset", 0, {"path": str(path), "eval_size": 1}, bad_rows="skip")
    task.screen_prompts(encode)
    assert (task.size("train"), task.size("eval")) == (1, 1)
    assert len(task.skipped_rows) == 1
    assert task.skipped_rows[0].startswith(f"{path}, line 2: Prompt has 82 tokens, over the limit of 10 "
                                           "(data.max_prompt_tokens)")
    strict = make_task("dataset", 0, {"path": str(path), "eval_size": 1})
    with pytest.raises(DataError, match=r"qa\.jsonl, line 2: Prompt has 82 tokens, over the limit of 10"):
        strict.screen_prompts(encode)


def test_prompt_limit_is_capped_by_the_model_context():
    assert prompt_token_limit(1024, None, 256) == (1024, "data.max_prompt_tokens")
    assert prompt_token_limit(100, 512, 256) == (100, "data.max_prompt_tokens")
    assert prompt_token_limit(1024, 512, 256) == (256, "the model's context of 512 minus rollout.max_new_tokens=256")
    with pytest.raises(ConfigError, match="rollout.max_new_tokens=512 leaves no room"):
        prompt_token_limit(1024, 512, 512)


def test_prompt_template_formats_columns_and_names_a_missing_one(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps({"question": "2+2", "topic": "sums", "answer": "4"}) + "\n"
                    + json.dumps({"question": "3+3", "answer": "6"}) + "\n")
    template = "Topic: {topic}\nSolve: {question}"
    task = make_task("dataset", 0, {"path": str(path), "prompt_template": template}, bad_rows="skip")
    assert [task.problem("train", i).prompt for i in range(task.size("train"))] == ["Topic: sums\nSolve: 2+2"]
    with pytest.raises(DataError, match=r"line 2: column 'topic' \(template\) is missing.*prompt_template"):
        make_task("dataset", 0, {"path": str(path), "prompt_template": template})
    with pytest.raises(ConfigError, match="must name columns"):
        make_task("dataset", 0, {"path": str(path), "prompt_template": "no columns"})


def test_a_saved_dataset_directory_and_an_unreachable_hub_name(tmp_path, monkeypatch):
    from datasets import Dataset, DatasetDict

    DatasetDict({"train": Dataset.from_list([{"prompt": "a", "answer": "1"}] * 3),
                 "test": Dataset.from_list([{"prompt": "b", "answer": "2"}])}).save_to_disk(str(tmp_path / "saved"))
    task = make_task("dataset", 0, {"path": str(tmp_path / "saved"), "eval_path": str(tmp_path / "saved")})
    assert (task.size("train"), task.problem("eval", 0).prompt) == (3, "b")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError, match="'no-such-org/no-such-set' is not a local file or directory.*save_to_disk"):
        make_task("dataset", 0, {"path": "no-such-org/no-such-set"})
