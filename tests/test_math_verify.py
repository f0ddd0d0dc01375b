"""Math verification: answer extraction, normalization, equivalence, the time limit, the math task, the audit
set and the `rlvr verify` command."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("math_verify", reason="math verification needs the 'math' extra")

from rlvr.cli.main import main  # noqa: E402
from rlvr.errors import DataError  # noqa: E402
from rlvr.evaluation.verifier_audit import read_audit_rows, run_audit, summary  # noqa: E402
from rlvr.rewards.pool import RewardPool, RewardRequest  # noqa: E402
from rlvr.tasks import TASKS, make_task  # noqa: E402
from rlvr.verifiers.extraction import answer_line, extract_answer, final_number, last_boxed  # noqa: E402
from rlvr.verifiers.math import answers_match, math_score  # noqa: E402
from rlvr.verifiers.normalize import normalize_answer  # noqa: E402
from rlvr.verifiers.timelimit import TimeLimitExceeded, time_limit  # noqa: E402

AUDIT_FILE = Path(__file__).resolve().parent.parent / "data" / "math_audit.jsonl"
PATHOLOGICAL = r"So the answer is \boxed{9^{9^{9^{9}}}}."


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


# --- extraction ---------------------------------------------------------------------------------------------

def test_last_boxed_handles_nesting_fbox_escaped_braces_and_unclosed_boxes():
    assert last_boxed(r"first \boxed{1}, then \boxed{\frac{\sqrt{3}}{2}} done") == r"\frac{\sqrt{3}}{2}"
    assert last_boxed(r"\fbox{7}") == "7"
    assert last_boxed(r"\boxed{\{1, 2\}}") == r"\{1, 2\}"
    assert last_boxed(r"\boxed 5 apples") == "5"
    assert last_boxed(r"\boxed{3} and then \boxed{4") == "3"  # a truncated last box does not count
    assert last_boxed("no box here") is None


def test_answer_line_takes_the_last_marker_up_to_its_sentence_end():
    assert answer_line("Answer: 12\nmore text\nFinal answer: 13") == "13"
    assert answer_line("steps\n#### 1,234") == "1,234"
    assert answer_line(r"Final Answer: The final answer is $\frac{3}{4}$. I hope it is correct.") == r"\frac{3}{4}"
    assert answer_line("**Answer:** 12 apples") == "12 apples"
    assert answer_line("The correct option is (C).") == "(C)"
    assert answer_line("The answer is 12 apples, which is more than before.") == "12 apples"
    assert answer_line("To answer this, we add.") is None


def test_final_number_reads_signs_separators_decimals_and_fractions():
    assert final_number("so 10 - 3 = 7.") == "7"
    assert final_number("the value of x is -5") == "-5"
    assert final_number("she paid 1,250.50 dollars") == "1,250.50"
    assert final_number("the ratio is 3 / 4") == "3/4"
    assert final_number("no digits") is None


def test_final_number_never_takes_a_number_out_of_an_expression():
    assert final_number(r"x = \frac{1+\sqrt{5}}{2}") is None
    assert final_number(r"$x \in [0,1)$") is None
    assert final_number(r"so $2^{4}$") is None
    assert final_number("so it is 16.") == "16"


def test_extraction_order_is_configurable_and_validated():
    text = "Answer: 3\nbut really \\boxed{4}"
    assert extract_answer(text) == "4"
    assert extract_answer(text, "answer_line,boxed") == "3"
    assert extract_answer("the result is 9", ["boxed"]) is None
    assert extract_answer("  5 cm ", "whole") == "5 cm"
    with pytest.raises(ValueError, match="unknown answer extractor"):
        extract_answer(text, "boxes")


# --- normalization and equivalence --------------------------------------------------------------------------

def test_normalize_strips_units_and_keeps_known_units_for_conflict_checks():
    assert normalize_answer(r"12 \text{ cm}^2").unit == "cm^2"
    assert normalize_answer("12 square centimeters").unit == "cm^2"
    assert normalize_answer("10 m/s").latex == "10"
    assert normalize_answer("20 apples").latex == "20"
    assert normalize_answer("5x").latex == "5x"  # a product, not a unit
    assert normalize_answer("2 x").latex == "2 x"


def test_normalize_rewrites_notation():
    assert normalize_answer(r"3\frac{1}{2}").latex == r"\frac{7}{2}"
    assert normalize_answer("-2 1/4").latex == r"-\frac{9}{4}"
    assert normalize_answer(r"0.1\overline{6}").latex == r"\frac{1}{6}"
    assert normalize_answer("1.5e-3").latex == r"1.5\times 10^{-3}"
    assert normalize_answer("twenty-five").latex == "25"
    assert normalize_answer(r"\text{(C)}").text == "C"
    assert normalize_answer("No solution.").text == "no solution"


@pytest.mark.parametrize("gold, candidate", [
    ("1/3", "12/36"), ("0.5", r"\dfrac{1}{2}"), (r"\frac{7}{2}", r"3\frac{1}{2}"), (r"25\%", "25"),
    (r"12.5\%", "0.125"), ("1200", r"1.2 \times 10^3"), ("0.0015", "1.5e-3"), (r"\{1, 2, 3\}", r"\{3, 1, 2\}"),
    (r"(-\infty, 5]", r"x \leq 5"), ("5", "5 cm"), ("18.50", r"\$18.50"), (r"30^\circ", "30 degrees"),
    (r"2\sqrt{2}", r"\sqrt{8}"), ("5", "x = 5"), ("2, 3", r"x=2 \text{ or } x=3"), ("Tuesday", r"\text{tuesday}"),
    ("B", "(B) 12"), ("1000000", "1,000,000"), (r"\infty", "infinity"), ("7", "seven"),
])
def test_equivalent_forms_match(gold, candidate):
    assert answers_match(candidate, gold)


@pytest.mark.parametrize("gold, candidate", [
    ("1/3", "0.33"), (r"\pi", "3.14"), ("-3", "3"), ("[1, 2)", "[1, 2]"), (r"\{1, 2, 3\}", r"\{1, 2\}"),
    ("5 m", "5 cm"), ("(2, 3)", "(3, 2)"), ("Tuesday", "Tuesyad"), (r"3\frac{1}{2}", r"\frac{3}{2}"),
    (r"50\%", "5"), ("5x", "5"), ("A", "(D)"), ("B", "(B) or (C)"), ("2", ""),
])
def test_different_answers_do_not_match(gold, candidate):
    assert not answers_match(candidate, gold)


def test_math_score_extracts_then_compares_and_reads_gold_from_a_solution():
    completion = r"Adding gives $\frac{8}{12}$, so the answer is $\boxed{\frac{8}{12}}$."
    assert math_score("", completion, r"\frac{2}{3}") == 1.0
    assert math_score("", completion, r"Worked solution ... so it is \boxed{\dfrac{2}{3}}.") == 1.0
    assert math_score("", completion, "0.6") == 0.0
    assert math_score("", "I do not know.", "7") == 0.0
    assert math_score("", "Answer: 7\nthough 8 is tempting", "7") == 1.0
    assert math_score("", "The result is 7.", "7", extract="boxed") == 0.0  # strict: only boxed answers count
    assert math_score("", r"The result is $\boxed{7}$.", "7", extract="boxed") == 1.0
    with pytest.raises(ValueError, match="extract must be one of auto, boxed"):
        math_score("", "7", "7", extract="final_number")


# The classes of misses and false positives measured on a peer's labelled suite (issue 13), each as
# (gold, prediction, expected), through both the raw comparison and the completion path.
ISSUE_CASES = [
    ("{1,2,3}", r"\boxed{1} and \boxed{2} and \boxed{3}", True),
    ("(2, 2), (6, 2)", r"\boxed{(2, 2)} \quad \text{and} \quad \boxed{(6, 2)}", True),
    ("x < 3", r"We find that $x \lt 3$.", True),
    ("34", "Final Answer: The largest $n$ is 34.", True),
    ("9", "Answer $ 9 $", True),
    ("9", "Answer: 9", True),
    ("1.22", "1,22", True),
    ("1220", "1,220", True),
    ("1.22", "1,220", False),
    ("10455", r"First \boxed{255}. I forgot the carries; the final answer is $10,455$.", True),
    ("255", r"First \boxed{255}. I forgot the carries; the final answer is $10,455$.", False),
    ("5", r"Initially \boxed{4}. After correcting the count, the answer is \boxed{5}.", True),
    ("4", r"Initially \boxed{4}. After correcting the count, the answer is \boxed{5}.", False),
]
FALSE_POSITIVE_TRAPS = [  # the fallback and hedging classes: none may score
    ("2", r"x = \frac{1+\sqrt{5}}{2}"), ("1", r"$x \in [0,1)$"), ("32349", r"\boxed{32, 349}"),
    ("1", r"\boxed{1} \boxed{2}"), ("1", r"\boxed{1} or \boxed{2}"), ("3", "the answer is 3 or 4"),
    ("3", "The answer is $3$ or $4$."), ("2", "$x = 2$ or $x = 5$"), ("A", "The answer is (A) or (B)."),
    ("4", "$2^{4}$"), ("3", "$(3, 4)$"), ("5", "5 thousand"), ("5 m", "5 cm"),
]


@pytest.mark.parametrize("gold, prediction, expected", ISSUE_CASES)
def test_the_issue_cases_on_both_paths(gold, prediction, expected):
    assert answers_match(prediction, gold) is expected
    assert math_score("", prediction, gold) == float(expected)


@pytest.mark.parametrize("gold, prediction", FALSE_POSITIVE_TRAPS)
def test_fallback_and_hedging_traps_never_score(gold, prediction):
    assert not answers_match(prediction, gold)
    assert math_score("", prediction, gold) == 0.0


def test_a_gold_solution_boxing_several_answers_keeps_them_all():
    solution = r"Both pairs work: \boxed{(2, 2)} \quad \text{and} \quad \boxed{(6, 2)}."
    assert math_score("", r"The pairs are $(6,2)$ and $(2,2)$.", solution) == 1.0
    assert math_score("", r"\boxed{(6, 2)}", solution) == 0.0  # half of the answer
    assert math_score("", r"\boxed{3}", r"First \boxed{2}. Then, correcting the count: \boxed{3}.") == 1.0


def test_alternatives_are_the_answer_when_the_gold_has_several_values():
    assert answers_match("$x = 2$ or $x = 5$", r"\{2, 5\}")
    assert answers_match(r"\boxed{-2} or \boxed{2}", r"\pm 2")
    assert math_score("", "It could be 3 or 4; checking both, only one works: the answer is 3.", "3") == 1.0


# --- time limit ---------------------------------------------------------------------------------------------

def test_a_pathological_expression_is_cut_off_at_the_time_limit():
    start = time.monotonic()
    with pytest.raises(TimeLimitExceeded, match="longer than 0.5 s"):
        math_score("", PATHOLOGICAL, "1", timeout_s=0.5)
    assert time.monotonic() - start < 3.0


def test_time_limit_restores_the_previous_handler_and_is_off_outside_the_main_thread():
    import signal

    before = signal.getsignal(signal.SIGALRM)
    with time_limit(1.0):
        pass
    assert signal.getsignal(signal.SIGALRM) is before
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(math_score("", r"\boxed{0.5}", "1/2", timeout_s=0.1)))
    worker.start()
    worker.join()
    assert outcome == [1.0]


def test_in_the_worker_pool_a_timeout_is_an_error_and_the_worker_survives():
    spec = "rlvr.verifiers.math:math_score"
    requests = [RewardRequest(0, spec, "", PATHOLOGICAL, {"answer": "1", "timeout_s": 0.5}),
                RewardRequest(1, spec, "", r"\boxed{12/36}", {"answer": "1/3"})]
    with RewardPool(num_workers=1, timeout_s=20) as pool:
        pool.start()
        outcomes = pool.score(requests)
        assert pool.restarts == 0
    assert outcomes[0].status == "error" and "TimeLimitExceeded" in outcomes[0].message
    assert outcomes[1].status == "ok" and outcomes[1].value == 1.0


# --- the math task ------------------------------------------------------------------------------------------

def test_math_task_reads_answers_and_boxed_solutions(tmp_path):
    assert TASKS.get("math").verifier == "rlvr.verifiers.math:math_score"
    path = write_jsonl(tmp_path / "math.jsonl", [
        {"problem": "1+1?", "answer": "2"},
        {"problem": "Half of 1?", "answer": r"Halving gives \boxed{\frac{1}{2}}."},
    ])
    task = make_task("math", 0, {"path": path, "eval_size": 1})
    train, held_out = task.problem("train", 0), task.problem("eval", 0)
    assert train.answer == "2" and held_out.answer == r"\frac{1}{2}"
    assert train.prompt.startswith("1+1?") and "\\boxed{}" in train.prompt
    plain = make_task("math", 0, {"path": path, "instruction": ""})
    assert plain.problem("train", 0).prompt == "1+1?"


def test_math_task_keeps_the_solution_and_takes_gold_from_it(tmp_path):
    solution = "We compute step by step.\n" + "Some reasoning. " * 20 + r"So the answer is $\boxed{42}$."
    path = write_jsonl(tmp_path / "math.jsonl", [{"problem": "Q?", "solution": solution}])
    task = make_task("math", 0, {"path": path, "answer_column": "solution", "solution_column": "solution"})
    p = task.problem("train", 0)
    assert p.answer == "42" and p.solution == solution
    assert math_score(p.prompt, r"It is \boxed{42}.", **p.reward_fields()) == 1.0


def test_math_task_reads_parquet_and_saved_datasets(tmp_path):
    rows = [{"problem": "1+1?", "solution": r"So \boxed{2}."}, {"problem": "2+2?", "solution": r"So \boxed{4}."}]
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow

    pq.write_table(pyarrow.Table.from_pylist(rows), tmp_path / "math.parquet")
    task = make_task("math", 0, {"path": str(tmp_path / "math.parquet"), "answer_column": "solution"})
    assert [task.problem("train", i).answer for i in range(2)] == ["2", "4"]
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"))
    task = make_task("math", 0, {"path": str(tmp_path / "saved"), "answer_column": "solution"})
    assert task.problem("train", 1).answer == "4"


def test_math_task_rejects_a_solution_without_a_boxed_answer_and_missing_columns(tmp_path):
    long_solution = "We compute.\n" + "More reasoning. " * 20
    path = write_jsonl(tmp_path / "bad.jsonl", [{"problem": "Q?", "solution": long_solution}])
    with pytest.raises(DataError, match="no complete"):
        make_task("math", 0, {"path": path, "answer_column": "solution"})
    with pytest.raises(DataError, match="answer_column"):
        make_task("math", 0, {"path": path})


# --- the audit set and the CLI ------------------------------------------------------------------------------

def test_shipped_audit_set_is_large_labelled_both_ways_and_varied():
    rows = read_audit_rows(AUDIT_FILE)
    assert len(rows) >= 500
    assert sum(r.expected for r in rows) >= 300 and sum(not r.expected for r in rows) >= 200
    assert {"fraction", "decimal_comma", "thousands", "mixed_number", "percent", "scientific", "set", "several_boxed",
            "interval", "inequality", "equation", "tuple", "matrix", "units", "degrees", "sqrt", "text", "choice",
            "sentence", "last_answer", "fallback", "hedging"} <= {r.row_class for r in rows}


def test_rlvr_agrees_with_the_audit_labels_at_least_as_often_as_math_verify_alone_on_both_paths():
    with RewardPool(num_workers=2, timeout_s=20) as pool:
        pool.start()
        result = summary(run_audit(read_audit_rows(AUDIT_FILE), pool, show_progress=False))
    judges = result["judges"]
    for path in ("raw", "completion"):
        assert judges[path]["agree"] >= judges["math_verify"]["agree"]
        assert judges[path]["false_negative_rate"] <= 0.01
        assert judges[path]["false_positives"] == 0
        for row_class in ("fallback", "hedging"):
            assert judges[path]["classes"][row_class]["false_positives"] == 0
    assert judges["math_verify"]["classes"]["hedging"]["false_positives"] > 0  # the audit can tell them apart


def test_audit_rows_are_validated(tmp_path):
    path = write_jsonl(tmp_path / "audit.jsonl", [{"gold": "1", "answer": "1", "completion": "1", "expected": True}])
    with pytest.raises(DataError, match="exactly one of 'answer' or 'completion'"):
        read_audit_rows(path)


def test_cli_audit_reports_rates_and_failing_rows_as_json(tmp_path, capsys):
    path = write_jsonl(tmp_path / "audit.jsonl", [
        {"gold": "$1/3$", "answer": "$12/36$", "expected": True, "class": "fraction"},
        {"gold": "2", "answer": "3", "expected": False},
        {"gold": "2", "answer": "2", "expected": False},  # mislabelled on purpose: reported as a false positive
    ])
    assert main(["verify", "audit", path, "--json", "--workers", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    for path_name in ("raw", "completion", "math_verify"):
        judge = report["judges"][path_name]
        assert judge["false_negative_rate"] == 0.0 and judge["false_positives"] == 1
        assert judge["false_positive_rate"] == pytest.approx(0.5)
        assert judge["classes"]["fraction"] == {"rows": 1, "equivalent": 1, "false_negatives": 0,
                                                "false_positives": 0, "agree": 1, "errors": 0}
    assert [f["line"] for f in report["failures"]] == [3]


def test_cli_audit_prints_per_class_fn_fp_and_the_agreement_of_each_judge(capsys):
    assert main(["verify", "audit", str(AUDIT_FILE), "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "per class" in out and "hedging" in out and "math-verify" in out
    assert "rlvr math_score" in out and "agrees with the labels on" in out


def test_cli_verify_scores_completions_with_a_task_verifier(tmp_path, capsys):
    path = write_jsonl(tmp_path / "completions.jsonl", [
        {"prompt": "1/2+1/4?", "completion": r"\boxed{\frac{3}{4}}", "answer": "0.75"},
        {"prompt": "2+2?", "completion": "Answer: 5", "answer": "4"},
    ])
    assert main(["verify", "--task", "math", path, "--json", "--workers", "1", "--set", "extract=boxed"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["score"] for r in lines[:2]] == [1.0, 0.0]
    assert lines[-1]["mean"] == 0.5 and lines[-1]["verifier"] == "rlvr.verifiers.math:math_score"
    assert main(["verify", "--task", "math", path, "--workers", "1"]) == 0
    assert "mean score 0.5000 over 2 rows" in capsys.readouterr().out


def test_cli_verify_errors_name_the_fix(tmp_path, capsys):
    path = write_jsonl(tmp_path / "rows.jsonl", [{"prompt": "p", "answer": "1"}])
    assert main(["verify", "--task", "mathh", path]) == 2
    assert "Did you mean 'math'" in capsys.readouterr().err
    assert main(["verify", "--task", "math", path]) == 2
    assert "needs a text column 'completion'" in capsys.readouterr().err
    assert main(["verify", path]) == 2
    assert "--task NAME" in capsys.readouterr().err
