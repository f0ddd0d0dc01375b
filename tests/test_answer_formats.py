"""The answer-format matrix (rlvr/evaluation/answer_formats.jsonl): every format real models write is paid when
right and refused when wrong by every built-in rule verifier it applies to, by one final-answer rule
(rlvr.verifiers.extraction), and docs/verifiers.md publishes the matrix as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("math_verify", reason="math verification needs the 'math' extra")

from rlvr.evaluation.answer_formats import VERIFIERS, format_cases, format_rows, markdown_table  # noqa: E402
from rlvr.rewards.loading import resolve_function  # noqa: E402
from rlvr.verifiers.extraction import answer_regions, extract_answer, reply_text, turn_text  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NEEDS = {"reasoning_gym": "reasoning_gym"}


def score(case) -> float:
    if case.row.verifier in NEEDS:
        pytest.importorskip(NEEDS[case.row.verifier])
    return float(resolve_function(case.spec)(case.prompt, case.completion, answer=case.reference, **case.fields))


CASES = format_cases(58, 14, tuple(v for v in VERIFIERS if v != "code"))


@pytest.mark.parametrize("case", CASES, ids=[f"{c.row.verifier}-{c.row.format}-{'right' if c.right else 'wrong'}"
                                             for c in CASES])
def test_every_format_is_paid_when_right_and_refused_when_wrong(case):
    assert score(case) == (1.0 if case.right else 0.0), case.completion


def test_the_matrix_holds_every_format_the_issue_names_for_every_text_verifier():
    formats = {r.format for r in format_rows()}
    assert {"r1_think_answer", "answer_tag", "minerva", "minerva_after_boxes", "gsm8k", "boxed_in_text", "boxed_pmod",
            "boxed_then_unit", "boxed_degrees", "boxed_percent", "display_math", "bold_answer_line", "answer_colon",
            "the_answer_is", "french", "chinese", "bare_then_eos", "answer_then_next_turn"} <= formats
    for verifier in ("math_score", "answers_match", "exact_match", "arithmetic", "reasoning_gym"):
        mine = {r.format for r in format_rows() if r.verifier == verifier}
        assert {"r1_think_answer", "answer_tag", "minerva", "gsm8k", "answer_then_next_turn"} <= mine, verifier


def test_code_answers_in_every_format_run_their_program(tmp_path):
    pytest.importorskip("rlvr.sandbox")
    from rlvr.sandbox.policy import minimum_isolation
    from rlvr.sandbox.run import prepare_sandbox

    try:
        prepare_sandbox(minimum_isolation(), [])
    except Exception as e:  # noqa: BLE001 - no sandbox on this machine
        pytest.skip(f"no sandbox: {e}")
    for case in format_cases(58, 14, ("code",)):
        assert score(case) == (1.0 if case.right else 0.0), case.completion


def test_docs_publish_the_matrix_as_it_is():
    assert markdown_table() in (ROOT / "docs" / "verifiers.md").read_text(encoding="utf-8")


# --- the final-answer rule, piece by piece ----------------------------------------------------------------------

def test_a_reply_ends_at_its_turn_and_its_thinking_is_working():
    text, ended = turn_text("<|im_start|>assistant\n72<|im_end|>\n<|im_start|>user\n73")
    assert text.strip() == "72" and ended  # the opening and its role dropped, the next turn cut
    assert turn_text("<|start_header_id|>assistant<|end_header_id|>\n\n72<|eot_id|>")[0].strip() == "72"
    assert turn_text("72") == ("72", False)
    text, closed = reply_text("<think>maybe \\boxed{71}</think>The answer is 72. I hope it is correct.")
    assert "71" not in text and closed  # a sign-off closes the answer, and stays for math-verify's own anchor


def test_the_explicit_final_answer_is_the_answer_and_intermediate_results_are_work():
    [region] = answer_regions("First \\boxed{12}, then \\boxed{60}.\nFinal Answer: The final answer is 72.")
    assert region.how == "final_line" and "12" not in region.text
    assert [r.text for r in answer_regions("<answer>72</answer> then <answer>73</answer>")] == ["72", "73"]
    assert answer_regions("Réponse : 72")[0].text == "Answer: 72"
    assert answer_regions("#### 72")[0].text == "Final answer: 72"
    assert answer_regions("#### Step 1\n58 + 14 = 72")[0].how == "reply"  # a markdown heading is no GSM8K line
    assert answer_regions("\\boxed{72} is my final answer.")[0].how == "reply"  # nothing follows the marker


def test_a_hedge_is_two_final_answers_not_intermediate_work():
    assert extract_answer("<answer>72</answer><answer>73</answer>") == "72 or 73"
    assert extract_answer("\\boxed{12}\nFinal answer: 72") == "72"
    assert extract_answer("Step 1: add the ones.") is None  # a step label is not an answer


def test_the_rule_stays_linear_on_adversarial_input():
    import time

    from rlvr.tasks.dataset import exact_match
    from rlvr.verifiers.rules import written_final_answers

    texts = ["Good luck" + " " * 390 + "x", "1 2 3 " * 20000, "<answer>" * 5000 + "x", "Final answer: " * 5000,
             "$" * 20000, "**" * 20000 + "x", "\\boxed{" * 3000, "####" * 10000, "réponse " * 5000,
             "<|im_end|>" * 5000 + "x", "I hope it is correct. " * 2000, ("Let me know if " + "a" * 100 + " ") * 300]
    start = time.perf_counter()
    for text in texts:
        answer_regions(text), extract_answer(text), written_final_answers(text), exact_match("", text, "1")
    assert time.perf_counter() - start < 20.0
