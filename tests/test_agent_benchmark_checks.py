"""The exact checks of benchmarks/real_tool_use.py and real_games.py: written apart from the rewards and the
environments, they are what the published agent figures are measured by (docs/results.md)."""

from __future__ import annotations

import ast

import pytest

from benchmarks.real_games import guess_solved, lake_solved
from benchmarks.real_tool_use import episode_measures

QUESTION = "What is 518 * 632?"


def conversation(*turns: tuple[str, str]) -> list[dict]:
    return [{"role": role, "content": content} for role, content in turns]


def test_a_call_with_both_operands_and_the_product_meets_all_three_tool_measures():
    messages = conversation(("assistant", "<calculator>518*632</calculator>"), ("tool", "327376"),
                            ("assistant", "518 * 632 = 327376"))
    assert episode_measures(QUESTION, messages, "327376") == {"well_formed": True, "operands": True, "exact": True}


def test_a_call_the_calculator_rejects_is_not_well_formed_and_a_call_on_other_numbers_lacks_the_operands():
    rejected = conversation(("assistant", "<calculator>518 x 632</calculator>"), ("tool", "Error: invalid syntax"),
                            ("assistant", "327376"))
    assert episode_measures(QUESTION, rejected, "327376") == {"well_formed": False, "operands": True, "exact": True}
    other = conversation(("assistant", "<calculator>500*600</calculator>"), ("tool", "300000"),
                         ("assistant", "About 300000"))
    assert episode_measures(QUESTION, other, "327376") == {"well_formed": True, "operands": False, "exact": False}


def test_no_call_is_measured_as_none_and_the_answer_is_read_from_the_last_assistant_turn_only():
    messages = conversation(("assistant", "327376"), ("user", "Are you sure?"), ("assistant", "It is 327375."))
    assert episode_measures([{"role": "user", "content": QUESTION}], messages, "327376") == {
        "well_formed": False, "operands": False, "exact": False}


def test_guess_the_number_is_solved_when_some_guess_s_first_integer_is_the_secret():
    won = conversation(("assistant", "10"), ("user", "lower"), ("assistant", "7 I think"), ("user", "correct"))
    assert guess_solved(won, "7")
    assert not guess_solved(conversation(("assistant", "10 or 7"), ("user", "lower")), "7")
    assert not guess_solved(conversation(("user", "7")), "7")  # only the player's turns count


def test_frozen_lake_walks_each_turn_s_first_move_and_a_hole_ends_the_walk():
    lake = "SFF/FHF/FFG"
    assert lake_solved(conversation(("assistant", "right"), ("assistant", "Right, then down"),
                                    ("assistant", "down"), ("assistant", "down")), lake)
    assert not lake_solved(conversation(("assistant", "down"), ("assistant", "right"), ("assistant", "right"),
                                        ("assistant", "down")), lake)  # (1, 1) is a hole
    assert not lake_solved(conversation(("assistant", "up"), ("assistant", "left")), lake)  # off the grid: stays


def test_guess_directions_tell_counting_upward_from_reading_the_replies():
    from benchmarks.real_games import guess_directions

    counting = conversation(("assistant", "1"), ("user", "higher"), ("assistant", "2"), ("user", "higher"),
                            ("assistant", "3"), ("user", "lower"), ("assistant", "4"))
    assert guess_directions(counting) == {"higher": [True, True], "lower": [False]}
    reading = conversation(("assistant", "10"), ("user", "lower"), ("assistant", "I say 5"), ("user", "higher"),
                           ("assistant", "hmm"), ("user", "Reply with a number."), ("assistant", "7"))
    assert guess_directions(reading) == {"higher": [], "lower": [True]}  # a non-guess breaks the pair


def test_sampled_directions_pool_the_training_games_per_ten_steps(tmp_path):
    import json

    from benchmarks.real_games import sampled_directions

    up = conversation(("assistant", "1"), ("user", "higher"), ("assistant", "2"), ("user", "lower"), ("assistant", "3"))
    down = conversation(("assistant", "10"), ("user", "lower"), ("assistant", "4"))
    rows = [{"step": 1, "messages": up}, {"step": 10, "messages": down}, {"step": 11, "messages": down}]
    (tmp_path / "completions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    first, second = sampled_directions(tmp_path)
    assert (first["steps"], first["follows_higher"], first["follows_lower"], first["lower_replies"]) == \
        ("1-10", 1.0, 0.5, 2)
    assert (second["steps"], second["follows_higher"], second["follows_lower"]) == ("11-20", None, 1.0)


def verifier_pays(reply: str, expected_repr: str) -> bool:
    """Absolute Zero's deduction verdict as the training reward reads it (rlvr.tasks.program_io)."""
    from rlvr.tasks.program_io import same_value, stated_value

    return same_value(expected_repr, stated_value(reply, "output"))


def test_absolute_zero_s_exact_check_agrees_with_the_verifier_on_the_asked_form():
    from benchmarks.self_play import exact_correct

    asked = [("Output: 26", "26", True), ("f adds 3, so\nOutput: 26", "26", True), ("Output: `[1, 2]`", "[1, 2]", True),
             ("Output: 'WORLD'", "'WORLD'", True), ("Output: WORLD", "'WORLD'", True), ("Output: 25", "26", False),
             ("Output: True", "1", False), ("output: 2.0", "2", True), ("Output: 1\nOutput: 2", "2", True)]
    for reply, expected, right in asked:
        assert exact_correct(reply, ast.literal_eval(expected)) is right, reply
        assert verifier_pays(reply, expected) is right, reply


def test_absolute_zero_s_exact_check_refuses_what_only_the_lenient_verifier_reads():
    """The replies where the two part: the verifier also reads a value inside a sentence, in a ```output block, in
    the last fenced block, or a bare reply; the exact check takes only the asked line `Output: <value>`."""
    from benchmarks.self_play import exact_correct

    lenient = ["26", "```\n26\n```", "```output\n26\n```", "So the output: 26"]
    for reply in lenient:
        assert verifier_pays(reply, "26") and not exact_correct(reply, 26), reply


def test_absolute_zero_s_anywhere_reading_agrees_with_the_verifier_on_a_value_inside_a_line():
    """The second reading (`anywhere`): the last 'Output:' wherever it stands, as the verifier reads a value inside a
    sentence or a code comment (the form SmolLM2 comes to write); still not a bare value or a ```output block."""
    from benchmarks.self_play import exact_correct

    inside = [("So the output: 26", "26", True), ("```python\nprint(f(23))  # Output: 26\n```", "26", True),
              ("```python\nprint(f('a'))  # Output: aWorld\n```", "'aWorld'", True),
              ("print(f(23))  # Output: 25", "26", False)]
    for reply, expected, right in inside:
        assert exact_correct(reply, ast.literal_eval(expected), anywhere=True) is right, reply
        assert verifier_pays(reply, expected) is right, reply
    for reply in ["26", "```\n26\n```", "```output\n26\n```"]:
        assert not exact_correct(reply, 26, anywhere=True), reply


def test_the_games_summary_reads_gigpo_s_step_groups_from_the_training_metrics(tmp_path, capsys):
    import json

    from benchmarks.real_games import print_step_groups, step_groups

    run = tmp_path / "gigpo" / "seed0"
    run.mkdir(parents=True)
    rows = [{"step": 0, "eval/accuracy": 0.0},
            {"step": 1, "credit/step_group_size_mean": 2.0, "credit/singleton_step_groups": 0.5,
             "credit/step_group_size_max": 8.0},
            {"step": 2, "credit/step_group_size_mean": 3.0, "credit/singleton_step_groups": 0.25,
             "credit/step_group_size_max": 5.0}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert step_groups(run) == {"size": 2.5, "singletons": 0.375, "largest": 8.0}
    assert step_groups(tmp_path) == {"size": None, "singletons": None, "largest": None}  # a run without them
    print_step_groups(tmp_path, [{"credit": "gigpo", "seed": 0}, {"credit": "episode", "seed": 0}])
    assert "| 0 | 2.50 | 37.5% | 8 |" in capsys.readouterr().out


def test_the_search_readers_fields_are_a_passage_s_values_without_the_question_s_own_name():
    from benchmarks.real_search import fields, random_field_exact

    person = ("Doc 1 (Title: Pathdel Drothbusk) Pathdel Drothbusk (born 1823) was a chandler from Toulorholm. "
              "Pathdel belonged to the Rolpax Company.")
    question = "In which town was Pathdel Drothbusk born?"
    assert fields(person, question) == ["1823", "chandler", "Toulorholm", "Rolpax Company"]
    assert random_field_exact(person, question, ["Toulorholm"]) == 0.25
    guild = "Doc 1 (Title: The Neilzi Guild) The Neilzi Guild was founded in 1836. Its hall stands in Krunustead."
    assert fields(guild, "In what year was the guild of Amos Keller founded?") == ["Neilzi Guild", "1836", "Krunustead"]
    assert random_field_exact("No passage matches the query.", question, ["Toulorholm"]) == 0.0


def test_the_best_constant_answer_counts_a_question_once_whatever_its_references():
    from benchmarks.real_search import best_constant

    rows = [{"golden_answers": ["Fethpour", "river Fethpour"]}, {"golden_answers": ["fethpour"]},
            {"golden_answers": ["Sukin Vale"]}, {"golden_answers": ["1823"]}]
    assert best_constant(rows) == ("fethpour", 0.5)


def test_the_search_readers_on_today_s_held_out_questions(tmp_path, monkeypatch):
    pytest.importorskip("bm25s", reason="the search environment's index needs the 'search' extra")
    import json
    from types import SimpleNamespace

    from benchmarks.real_search import readers

    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    readers(SimpleNamespace(output=str(tmp_path)))
    result = json.loads((tmp_path / "readers.json").read_text())
    assert result["questions"] == 60
    assert (result["best constant answer"], round(60 * result["best constant"])) == ("sukin vale", 6)
    assert round(60 * result["the first field of the first passage"]) == 10


def test_the_rlpr_baseline_replies_of_a_problem_are_its_right_wrong_constant_and_restated_replies():
    from benchmarks.rlpr_baselines import MARKER, replies
    from rlvr.rewards.rlpr import reasoning_of

    by_class = replies("What is 52 + 68? Put the final answer in \\boxed{}.", "120")
    assert by_class["right: 'a + b = c. \\boxed{c}'"] == "52 + 68 = 120. \\boxed{120}"
    assert by_class["wrong by one: 'a + b = c+1. \\boxed{c+1}'"] == "52 + 68 = 121. \\boxed{121}"
    assert by_class["restated question: 'a + b = \\boxed{'"] == "52 + 68 = \\boxed{"
    constants = [reply for name, reply in by_class.items() if name.startswith("constant")]
    assert constants == [reply for name, reply in replies("What is 1 + 2?", "3").items() if name.startswith("constant")]
    # what RLPR scores is the reasoning before the last marker: the restatement's is the question's sum, unanswered
    assert reasoning_of(by_class["restated question: 'a + b = \\boxed{'"], MARKER) == "52 + 68 = "


def test_the_search_summary_counts_wrong_answers_copied_from_the_passages_and_queries_copying_the_example(tmp_path):
    import json

    from benchmarks.real_search import last_evaluation_errors

    question = "In which town was Faeza Finnaer born?"  # held out; the answer is Lurlouwick
    passage = ("<information>Doc 1 (Title: Faeza Finnaer) Faeza Finnaer (born 1790) was a cooper from Lurlouwick. "
               "Faeza belonged to the Zonveil Guild.</information>")

    def row(step, uid, *turns):
        roles = ["assistant", "user"] * len(turns)
        return {"step": step, "uid": uid, "prompt": [{"role": "user", "content": question}],
                "messages": [{"role": r, "content": t} for r, t in zip(roles, turns)]}

    rows = [row(0, 0, "<answer>Brindlewick</answer>"),
            row(10, 0, "<search>Faeza Finnaer</search>", passage, "<answer>Zonveil Guild</answer>"),
            row(10, 1, "<search>Amos Keller</search>", "<information>No passage matches the query.</information>",
                "<answer>Brindlewick</answer>"),
            row(10, 2, "<search>Faeza Finnaer</search>", passage, "<answer>Lurlouwick</answer>")]
    path = tmp_path / "eval_completions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    known = {question: {"question": question, "golden_answers": ["Lurlouwick"]}}
    assert last_evaluation_errors(path, known) == {
        "episodes": 3, "wrong": 2, "wrong, a field of the passages": 1, "queries": 3,
        "queries copying the example": 1}
