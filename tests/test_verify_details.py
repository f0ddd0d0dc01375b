"""`rlvr verify` says why each row scored what it did: the answer read from the completion against the row's
reference, or why scoring failed."""

import json

from rlvr.cli.main import main


def write_rows(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_verify_details_name_the_answer_the_reference_and_the_failure(tmp_path, capsys):
    path = write_rows(tmp_path / "rows.jsonl", [
        {"prompt": "2+3=", "completion": "5", "answer": "5"},
        {"prompt": "2+3=", "completion": "7", "answer": "5"},
        {"prompt": "2+3=", "completion": "five", "answer": "5"},
    ])
    assert main(["verify", "--task", "arithmetic", path, "--json", "--workers", "1"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()][:3]
    assert [(r["score"], r["answer"], r["reference"]) for r in rows] == [(1.0, "5", "5"), (0.0, "7", "5"),
                                                                         (0.0, None, "5")]
    assert rows[0]["details"] == "answer '5' matches reference '5'"
    assert rows[1]["details"] == "answer '7' is not reference '5'"
    assert rows[2]["details"] == "no answer found in the completion (reference '5')"
    assert main(["verify", "--task", "arithmetic", path, "--workers", "1"]) == 0
    table = capsys.readouterr().out
    assert "answer '7' is not reference '5'" in table and "no answer found" in table

    broken = tmp_path / "broken.py"
    broken.write_text("def score(prompt, completion, **fields):\n    raise ValueError('no parser for ' + completion)\n")
    assert main(["verify", "--verifier", f"{broken}:score", path, "--json", "--workers", "1"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()][:3]
    assert all(r["status"] == "error" and r["details"].startswith("error: ") for r in rows)
    assert "no parser for five" in rows[2]["details"]


def test_a_runs_completions_are_scored_against_their_reference_with_the_conversation(tmp_path, capsys):
    """completions.jsonl rows hold the answer the completion stated under `answer` and the problem's under
    `reference`: verify scores against the reference (scoring against `answer` would accept whatever the model
    said), and a conversational prompt reaches the verifier as the list of messages training gave it."""
    conversation = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+3="}]
    logged = {"step": 3, "task": "arithmetic", "uid": "p7", "sample": 1, "prompt": conversation, "reward": 0.0,
              "correct": False, "advantage": -0.5, "length": 2, "truncated": False, "answer_matches": False}
    path = write_rows(tmp_path / "completions.jsonl", [
        {**logged, "completion": "7", "answer": "7", "reference": "5"},
        {**logged, "sample": 2, "completion": "5", "answer": "5", "reference": "5", "answer_matches": True},
    ])
    assert main(["verify", "--task", "arithmetic", path, "--json", "--workers", "1"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()][:2]
    assert [(r["score"], r["reference"], r["id"]) for r in rows] == [(0.0, "5", "step 3 p7 #1"),
                                                                     (1.0, "5", "step 3 p7 #2")]

    seen = tmp_path / "seen.py"
    seen.write_text("def score(prompt, completion, **fields):\n"
                    "    assert sorted(fields) == ['answer', 'truncated'], fields\n"
                    "    return float(isinstance(prompt, list) and prompt[1]['content'] == '2+3=')\n")
    assert main(["verify", "--verifier", f"{seen}:score", path, "--json", "--workers", "1"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()][:2]
    assert [(r["score"], r["status"]) for r in rows] == [(1.0, "ok"), (1.0, "ok")]


def test_verify_counts_the_rows_with_no_answer_found_and_names_the_formats_read(tmp_path, capsys):
    """A prompt asking for one format scored by a verifier reading another shows as rows with no answer found."""
    rows = [{"prompt": "What is 2+3?", "completion": text, "answer": "5"}
            for text in ("<answer>5</answer>", "Antwort: 5", "Let me think.\nFive, I think.", "Hmm.\nNo idea.",
                         "Adding them.\nDone.")]
    path = write_rows(tmp_path / "rows.jsonl", rows)
    assert main(["verify", "--verifier", "rlvr.verifiers.math:math_score", path, "--json", "--workers", "1"]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["rows"] == 5 and summary["no_answer"] == 3 and summary["mean"] == 0.4
    assert main(["verify", "--verifier", "rlvr.verifiers.math:math_score", path, "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "no answer found in 3" in out and "Most completions state no answer this verifier reads" in out
    assert "<answer>" in out.split("Most completions")[1]
