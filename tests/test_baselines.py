"""The baselines printed beside the real-model claims (rlvr.evaluation.baselines), computed from the environments'
own rules on the held-out sets the runs are evaluated on."""

from __future__ import annotations

import json
from fractions import Fraction

from rlvr.evaluation import baselines as b
from rlvr.tasks.absolute_zero import HELDOUT


def test_tictactoe_random_legal_and_lowest_square_against_the_random_opponent_exactly():
    # the figures the issue reads against: 71.2% / 41.5% and 82.3% / 47.8%, over the whole game tree
    assert b.tictactoe_vs_random(b.random_legal, 0) == Fraction(299, 420)
    assert f"{float(b.tictactoe_vs_random(b.random_legal, 0)):.1%} / {float(b.tictactoe_vs_random(b.random_legal, 1)):.1%}" \
        == "71.2% / 41.5%"
    assert f"{float(b.tictactoe_vs_random(b.lowest_empty, 0)):.1%} / {float(b.tictactoe_vs_random(b.lowest_empty, 1)):.1%}" \
        == "82.3% / 47.8%"


def test_tictactoe_held_out_matches_are_played_as_the_evaluation_plays_them():
    lowest = b.tictactoe_heldout(b.lowest_empty)
    assert lowest == {"seat0": Fraction(24, 30), "seat1": Fraction(11, 30)}  # 30 matches a seat, deterministic
    rand = b.tictactoe_heldout(b.random_legal, eval_size=4)
    assert 0 < rand["seat1"] < rand["seat0"] < 1  # an expectation, not a draw


def test_kuhn_values_against_the_equilibrium_player():
    assert (b.kuhn_value(b.kuhn_equilibrium, 0), b.kuhn_value(b.kuhn_equilibrium, 1)) == (Fraction(-1, 18),
                                                                                            Fraction(1, 18))
    assert (b.kuhn_value(b.kuhn_random, 0), b.kuhn_value(b.kuhn_random, 1)) == (Fraction(-1, 6), Fraction(-1, 9))
    # betting and calling with the king alone earns the game's value against the equilibrium (it cannot exploit)
    assert (b.kuhn_value(b.kuhn_king_only, 0), b.kuhn_value(b.kuhn_king_only, 1)) == (Fraction(-1, 18),
                                                                                      Fraction(1, 18))


def test_guess_the_number_blind_best_counting_and_binary_search_on_the_held_out_secrets():
    secrets = b.guess_number_secrets()
    assert len(secrets) == 40
    best = b.best_blind_order(secrets)
    assert b.guess_number_success(b.blind_guesses(best)) == Fraction(45, 100)
    assert b.guess_number_success(b.blind_guesses([1, 2, 3, 4, 5])) == Fraction(35, 100)
    assert b.guess_number_success(b.binary_search) == 1
    assert sum(s in best for s in secrets) == 18  # the blind best is the five most frequent secrets


def test_absolute_zero_echo_and_constant_answers_on_the_held_out_questions():
    rows = [{"id": "identity-0", "input": "[1]", "output": "[1]"}, {"id": "add-0", "input": "2", "output": "5"},
            {"id": "add-1", "input": "3", "output": "5"}, {"id": "len-0", "input": "'ab'", "output": "2"}]
    assert b.echo_solved(rows) == 1
    assert b.constant_solved(rows) == ("5", 2, 4)  # per family: [1], 5 (twice), 2
    held_out = [json.loads(line) for line in HELDOUT.read_text().splitlines()]
    assert b.echo_solved(held_out) <= len(held_out)


def test_frozen_lake_random_walk_exactly_and_the_shortest_walk_on_the_held_out_maps():
    import random

    from rlvr.envs.frozen_lake import FrozenLakeEnvironment, FrozenLakeTask

    args = {"size": 3, "hole_fraction": 0.2, "min_distance": 2, "eval_size": 3}
    exact = b.frozen_lake_random_walk(args, 4)
    task, rng, won = FrozenLakeTask(**args), random.Random(0), 0
    for i in range(3):  # the same walk through the environment, sampled
        for _ in range(400):
            env = FrozenLakeEnvironment(task.problem("eval", i), task)
            for _ in range(4):
                if env.step(rng.choice(["Up", "Down", "Left", "Right"])).done:
                    break
            won += env.outcome().success
    assert abs(won / 1200 - float(exact)) < 0.05 and 0 < exact < 1
    assert b.frozen_lake_shortest(args, 4) == 1 and b.frozen_lake_shortest(args, 1) == 0  # min_distance 2
