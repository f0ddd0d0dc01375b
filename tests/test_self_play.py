"""Self-play (docs/self_play.md): Absolute Zero's proposals checked in the sandbox and counted, the learnability
reward, role-aware baselines, zero-sum games whose seats are episodes of the current policy (illegal moves, token
exactness of both seats), and a resumed run that takes exactly the next step of an uninterrupted one."""

from __future__ import annotations

import json
import random
from fractions import Fraction
from itertools import permutations

import pytest
import torch
from conftest import assert_policy_runs_were_sampled
from test_episodes import CHATML, RecordingEngine
from transformers import AutoModelForCausalLM

from rlvr.algorithms import ADVANTAGES, AdvantageInputs
from rlvr.config import EnvConfig, RunConfig, TaskConfig, TinyModelConfig
from rlvr.envs import make_tasks
from rlvr.envs.base import ENVIRONMENTS, Environment, EnvStep, Outcome
from rlvr.envs.kuhn_poker import ACTIONS, CARDS, GAME_VALUE, KuhnEquilibrium, KuhnPoker, payoff
from rlvr.envs.task import EnvTask
from rlvr.envs.tictactoe import TicTacToe
from rlvr.envs.two_player import Match, RandomPlayer
from rlvr.errors import ConfigError, RlvrError
from rlvr.models.loading import build_tiny_model, save_pretrained, train_tokenizer
from rlvr.models.prompts import PromptEncoder
from rlvr.rollout import SamplingParams, group_generator
from rlvr.rollout.chat_models import EngineChatModels, frozen_model
from rlvr.rollout.collect import make_collector
from rlvr.rollout.episodes import EpisodeRunner
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.tasks import GroupResult, make_task
from rlvr.tasks.absolute_zero import AbsoluteZeroTask, learnability, score
from rlvr.tasks.program_io import REJECTIONS
from rlvr.tracking.jsonl import read_jsonl
from rlvr.training.trainer import Trainer

# ------------------------------------------------------------------ Absolute Zero: proposals in the sandbox

IDENTITY = "```python\ndef f(a):\n    return a\n```\n```input\n'Hello World'\n```"


def proposal(program: str, call: str = "3") -> str:
    return f"Here is mine:\n```python\n{program}\n```\n```input\n{call}\n```"


REJECTED = {
    # set order follows each process's string-hash seed: 12 elements never list alike in two runs (4 could)
    "nondeterministic": proposal("def f(a):\n    return list({str(a) + c for c in 'abcdefghijkl'})"),
    "error": proposal("def f(a):\n    return a / 0"),
    "limit": proposal("def f(a):\n    while True:\n        a += 1"),
    "banned": proposal("import os\ndef f(a):\n    return os.getcwd()"),
    "syntax": proposal("def f(a)\n    return a"),
    "output": proposal("def f(a):\n    return f"),
    "format": "I would write a function that doubles its input.",
}


@pytest.mark.parametrize("reason", sorted(REJECTED))
def test_a_bad_proposal_is_rejected_with_its_reason(reason):
    result = score("", REJECTED[reason], azr_kind="propose", task_type="deduction")
    out = result.score
    assert out["valid"] == 0 and out["correct"] == 0
    assert result.payload["rejected"] == reason and json.loads(out["answer"]) == result.payload
    assert [r for r in REJECTIONS if out[f"rejected_{r}"]] == [reason]  # counted once, under its reason
    assert out["score"] == (-1.0 if reason == "format" else -0.5)


def test_memory_past_the_sandbox_limit_is_a_limit_rejection():
    out = score("", proposal("def f(a):\n    return len(' ' * (4 * 10**9))"), azr_kind="propose",
                task_type="deduction")
    assert out.payload["rejected"] == "limit"


def test_a_valid_proposal_is_filed_with_the_output_it_returns_in_both_runs():
    result = score("", proposal("def f(xs):\n    return sorted(xs)[::-1]", "[3, 1, 2]"), azr_kind="propose",
                   task_type="abduction")
    assert result.score["valid"] == 1 and result.score["score"] == 0.0  # its reward is its learnability, added later
    assert json.loads(result.score["answer"]) == result.payload == {
        "type": "abduction", "program": "def f(xs):\n    return sorted(xs)[::-1]", "input": "[3, 1, 2]",
        "output": "[3, 2, 1]"}


def test_solutions_are_judged_by_running_them():
    program = "def f(a, b):\n    return a * b"
    fields = {"program": program, "call_input": "3, 4", "output": "12"}
    assert score("", "```output\n12\n```", "solve", "deduction", **fields)["score"] == 1.0
    assert score("", "It is 13.", "solve", "deduction", **fields)["score"] == 0.0
    assert score("", "```input\n2, 6\n```", "solve", "abduction", **fields)["score"] == 1.0  # any input giving 12
    assert score("", "```input\n2, 5\n```", "solve", "abduction", **fields)["score"] == 0.0
    assert score("", "```input\nfoo(\n```", "solve", "abduction", **fields)["score"] == -1.0  # no input to read
    cases = [["2, 3", "6"], ["4, 5", "20"]]
    assert score("", "```python\ndef f(x, y):\n    return y * x\n```", "solve", "induction", program=program,
                 cases=cases)["score"] == 1.0
    assert score("", "```python\ndef f(x, y):\n    return 6\n```", "solve", "induction", program=program,
                 cases=cases)["score"] == 0.0
    assert score("", "```python\ndef f(x, y):\n    return x + y\n```", "solve", "induction", program=program,
                 cases=[["2, 2", "4"], ["3, 3", "9"]])["score"] == 0.0  # passes the first pair only


def test_an_induction_proposal_writes_inputs_for_a_given_program():
    fields = {"program": "def f(a):\n    return a + 1", "induction_inputs": 4}
    out = score("", "```input\n1\n```\n```input\n5\n```\n```input\n1\n```\n```message\nadds one\n```", "propose",
                "induction", **fields)
    assert out.payload["cases"] == [["1", "2"], ["5", "6"]]  # duplicates dropped
    assert score("", "```input\n1\n```", "propose", "induction", **fields).score["rejected_format"] == 1  # one is too few
    bad = score("", "```input\n1\n```\n```input\n'a'\n```", "propose", "induction", **fields)
    assert bad.payload["rejected"] == "error"  # 'a' + 1 raises


def group(problem, payloads, correct=None, scores=None) -> GroupResult:
    n = len(payloads)
    return GroupResult(problem, [""] * n, scores or [0.0] * n, correct or [False] * n, payloads)


def valid(task_type, program, call, output) -> dict:
    return {"type": task_type, "program": program, "input": call, "output": output}


def test_learnability_is_one_minus_the_solve_rate_strictly_inside_zero_and_one():
    assert learnability(0.0) == 0.0 and learnability(1.0) == 0.0
    assert learnability(0.25) == 0.75 and learnability(0.5) == 0.5


def test_follow_ups_file_proposals_count_rejections_and_pay_learnability():
    task = AbsoluteZeroTask(seed=0, types=["deduction"], min_solve=2)
    propose = task.problem("train", 0)
    assert propose.role == "deduction.propose" and propose.fields["azr_kind"] == "propose"
    double = valid("deduction", "def f(a):\n    return a * 11", "4", "44")
    payloads = [double, REJECTED_PAYLOAD["error"], double, valid("deduction", "def f(a):\n    return -a", "1", "-1")]
    solve = task.follow_ups(3, [group(propose, payloads)])
    # the two distinct valid proposals, then nothing more to top up (min_solve 2 is met)
    assert [p.uid for p in solve] == ["step3-deduction-0", "step3-deduction-1"]
    assert [p.answer for p in solve] == ["44", "-1"] and {p.role for p in solve} == {"deduction.solve"}
    assert task.follow_ups(3, [group(p, [None] * 4) for p in solve]) == []  # solve groups derive nothing
    assert len(task.buffers["deduction"]) == 3  # the identity seed plus the two new ones
    # the solver solved the first task 1 time in 4 and the second every time
    rewards = task.late_rewards([group(propose, payloads), group(solve[0], [None] * 4, [True, False, False, False]),
                                 group(solve[1], [None] * 4, [True] * 4)])
    assert rewards == [[0.75, 0.0, 0.75, 0.0], None, None]  # duplicate proposals share their task's learnability
    m = task.metrics()
    assert (m["proposals"], m["valid"], m["rejected/error"], m["buffer/deduction"]) == (4, 3, 1, 3)
    assert m["fresh_solve_rate"] == 0.625 and m["learnability"] == 0.5


REJECTED_PAYLOAD = {reason: {"rejected": reason} for reason in REJECTIONS}


def test_the_held_out_programs_are_disjoint_from_the_seeds_and_never_enter_a_buffer(tmp_path):
    from rlvr.errors import DataError
    from rlvr.tasks.absolute_zero import SEED_PROGRAM, program_identity

    task = AbsoluteZeroTask(seed=0, types=["deduction"], min_solve=0)
    held = {program_identity(r["program"]) for r in task.heldout}
    assert program_identity(SEED_PROGRAM) not in held  # the packaged set asks nothing about the seed program
    assert program_identity("def f(x):\n    return x") == program_identity(SEED_PROGRAM)  # names do not matter
    # a held-out set that asks about the seed program is refused
    (tmp_path / "eval.jsonl").write_text(json.dumps({"id": "echo-0", "program": "def f(s):\n    return s",
                                                      "input": "3", "output": "3"}) + "\n")
    with pytest.raises(DataError, match="echo-0 asks about a program the buffers are seeded with"):
        AbsoluteZeroTask(seed=0, eval_path=str(tmp_path / "eval.jsonl"))
    # a valid proposal of a held-out program (renamed) is not filed, not solved, and counted
    row = task.heldout[0]
    renamed = row["program"].replace("(x)", "(value)").replace("x ", "value ")
    assert program_identity(renamed) in held
    propose = task.problem("train", 0)
    payloads = [valid("deduction", renamed, row["input"], row["output"]),
                valid("deduction", "def f(a):\n    return a * 7", "2", "14")]
    solved = task.follow_ups(1, [group(propose, payloads)])
    assert [p.answer for p in solved] == ["14"]
    assert all(program_identity(e["program"]) not in held for entries in task.buffers.values() for e in entries)
    assert task.metrics()["rejected/heldout"] == 1


def test_a_type_without_fresh_tasks_is_topped_up_from_its_buffer():
    task = AbsoluteZeroTask(seed=0, types=["deduction", "abduction"], min_solve=1)
    solve = task.follow_ups(1, [group(task.problem("train", 0), [REJECTED_PAYLOAD["format"]] * 2),
                                group(task.problem("train", 1), [REJECTED_PAYLOAD["limit"]] * 2)])
    assert [(p.role, p.fields["program"]) for p in solve] == [("deduction.solve", "def f(a):\n    return a"),
                                                              ("abduction.solve", "def f(a):\n    return a")]
    assert task.late_rewards([group(task.problem("train", 0), [None] * 2)]) == [[0.0, 0.0]]
    assert task.metrics()["rejected/limit"] == 2


def test_the_task_state_round_trips_so_problems_and_top_ups_repeat():
    def advanced():
        task = AbsoluteZeroTask(seed=5, min_solve=3)
        answers = [valid("deduction", f"def f(a):\n    return a + {k}", "1", str(1 + k)) for k in range(4)]
        task.follow_ups(1, [group(task.problem("train", 0), answers)])
        task.late_rewards([])
        return task

    original = advanced()
    state = original.state_dict()
    twin = AbsoluteZeroTask(seed=5, min_solve=3)
    twin.load_state_dict(state)
    assert [original.problem("train", i).prompt for i in range(6)] == [twin.problem("train", i).prompt
                                                                       for i in range(6)]
    follow = [original.follow_ups(2, [group(original.problem("train", 3), [REJECTED_PAYLOAD["format"]])]),
              twin.follow_ups(2, [group(twin.problem("train", 3), [REJECTED_PAYLOAD["format"]])])]
    assert [p.prompt for p in follow[0]] == [p.prompt for p in follow[1]] and len(follow[0]) == 9


def test_the_held_out_answers_are_what_the_programs_return():
    task = make_task("absolute_zero", 0, {})
    assert task.size("eval") >= 100
    problems = [task.problem("eval", i) for i in range(task.size("eval"))]
    for p in random.Random(0).sample(problems, 5):  # all of them: benchmarks/self_play.py heldout
        out = score("", f"```output\n{p.answer}\n```", **p.fields)
        assert out["score"] == 1.0
        assert score("", "```output\nNone\n```", **p.fields)["score"] == 0.0


# ------------------------------------------------------------------ role-aware baselines


class Settings:
    advantage_epsilon, std_unbiased, role_baseline_decay = 1e-6, True, 0.5


def advantages(name, scores, roles, history=None):
    s = torch.tensor(scores, dtype=torch.float64)
    inp = AdvantageInputs(scores=s, group_ids=torch.arange(len(scores)), mask=torch.ones(len(scores), 2),
                          roles=roles, history=history)
    adv, history = ADVANTAGES.get(name)(inp, Settings())
    assert torch.equal(adv[:, 0], adv[:, 1])
    return adv[:, 0].tolist(), history


def test_task_relative_standardizes_within_each_task_and_role():
    roles = ["azr/deduction.propose"] * 3 + ["azr/deduction.solve"] * 2 + ["azr/abduction.solve"]
    got, _ = advantages("task_relative", [0.5, 0.0, -0.5, 1.0, 0.0, 1.0], roles)
    # propose: mean 0, std (N-1) 0.5; solve: mean 0.5, std 0.7071; a role alone: mean 0, std 1
    expected = [1.0, 0.0, -1.0, 0.5 / 0.5 ** 0.5, -0.5 / 0.5 ** 0.5, 1.0]
    assert got == pytest.approx(expected, abs=1e-5)


def test_role_baseline_is_a_running_mean_per_role_taken_before_each_sample():
    roles = ["ttt/seat0", "ttt/seat1", "ttt/seat0", "ttt/seat1"]
    got, history = advantages("role_baseline", [1.0, -1.0, 1.0, -1.0], roles)
    # decay 0.5: seat0's baseline 0 -> 0.5 -> 0.75; seat1's 0 -> -0.5 -> -0.75
    assert got == [1.0, -1.0, 0.5, -0.5]
    assert history == {"role_baseline": {"ttt/seat0": 0.75, "ttt/seat1": -0.75}}
    again, history = advantages("role_baseline", [0.0, 0.0], ["ttt/seat0", "ttt/seat1"], history)
    assert again == [-0.75, 0.75]  # carried over from the previous step


# ------------------------------------------------------------------ games


def play_out(game, moves):
    match = Match(game, [None, None])
    for seat, text in moves:
        match.move(seat, text)
    return match


def test_an_illegal_move_ends_the_game_as_a_loss_and_is_counted():
    occupied = play_out(TicTacToe(random.Random(0)), [(0, "5"), (1, "I take square 5")])
    assert occupied.over and occupied.returns() == (1.0, -1.0) and occupied.illegal == [0, 1]
    wordy = play_out(TicTacToe(random.Random(0)), [(0, "the middle one")])
    assert wordy.returns() == (-1.0, 1.0) and wordy.illegal == [1, 0]
    kuhn = play_out(KuhnPoker(random.Random(0)), [(0, "I bet"), (1, "I check")])  # facing a bet: call or fold
    assert kuhn.returns() == (2.0, -2.0) and kuhn.illegal == [0, 1]
    assert play_out(KuhnPoker(random.Random(0)), [(0, "check. Then bet")]).game.actions == ("check",)  # the first


def test_a_win_and_a_draw_are_scored_from_the_board():
    win = play_out(TicTacToe(random.Random(0)), [(0, "1"), (1, "4"), (0, "2"), (1, "5"), (0, "3")])
    assert win.over and win.returns() == (1.0, -1.0) and win.illegal == [0, 0]
    draw = play_out(TicTacToe(random.Random(0)), [(s % 2, str(m)) for s, m in enumerate([1, 2, 3, 5, 4, 6, 8, 7, 9])])
    assert draw.over and draw.returns() == (0.0, 0.0)


def expected_value(p1, p2) -> Fraction:
    """Player 1's exact expected chips: the 6 deals, each player's mixed strategy (card, actions) -> probs."""
    total = Fraction(0)

    def walk(cards, actions, prob):
        nonlocal total
        if actions not in ACTIONS:
            total += prob * payoff(cards, actions)
            return
        seat = len(actions) % 2
        for action, p in (p1, p2)[seat](cards[seat], actions).items():
            if p:
                walk(cards, actions + (action,), prob * p)

    for cards in permutations(CARDS, 2):
        walk(cards, (), Fraction(1, 6))
    return total


def played(match: Match) -> Match:
    """`match` after its fixed players have moved (a match is set up without moving them)."""
    match.advance()
    return match


@pytest.mark.parametrize("alpha", [Fraction(0), Fraction(1, 6), Fraction(1, 3)])
def test_kuhn_equilibrium_play_is_worth_minus_one_eighteenth_to_player_one(alpha):
    eq = KuhnEquilibrium(random.Random(0), alpha)
    assert expected_value(eq.policy, eq.policy) == GAME_VALUE == Fraction(-1, 18)
    always_bet = lambda card, actions: {a: Fraction(a in ("bet", "call")) for a in ACTIONS[actions]}  # noqa: E731
    assert expected_value(always_bet, eq.policy) < GAME_VALUE  # no strategy beats the value against it
    assert expected_value(eq.policy, always_bet) > GAME_VALUE  # ... nor as player 2: player 1 gains more
    # the sampled player follows the strategy: 3,000 hands against itself come close to the value
    rng = random.Random(1)
    chips = [played(Match(KuhnPoker(rng), [KuhnEquilibrium(rng, alpha), KuhnEquilibrium(rng, alpha)])).returns()[0]
             for _ in range(3000)]
    assert abs(sum(chips) / len(chips) - float(GAME_VALUE)) < 0.06


def policy_runs(ep) -> list[list[int]]:
    """The token ids of each run of policy tokens (an assistant turn) of an episode."""
    runs, current = [], []
    for token, policy in zip(ep.token_ids, ep.policy_mask):
        if policy:
            current.append(token)
        elif current:
            runs, current = runs + [current], []
    return runs + [current] if current else runs


def game_tokenizer():
    from rlvr.envs.kuhn_poker import KuhnPokerEnvironment
    from rlvr.envs.tictactoe import TicTacToeEnvironment

    corpus = [TicTacToe.rules, KuhnPoker.rules, *TicTacToeEnvironment.corpus_hint, *KuhnPokerEnvironment.corpus_hint,
              "user assistant 0123456789"] * 5
    tok = train_tokenizer(corpus, 200)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.eos_token = "<|im_end|>"
    tok.chat_template = CHATML
    return tok


# (tokens, how many nats of logit the policy's output layer adds to them): enough for legal moves in most replies, not so
# much that every reply repeats one move
MOVE_TOKENS = {"tictactoe": ([str(d) for d in range(1, 10)], 3.0),
               "kuhn_poker": (["Ġcheck", "Ġbet", "Ġcall", "Ġfold"], 4.0)}


def leaning_policy(game: str, lean: float | None = None):
    """A tiny chat model whose output layer has a bias of `lean` nats towards the game's move tokens, so that
    matches last several moves."""
    tok = game_tokenizer()
    torch.manual_seed(0)
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                                             max_position_embeddings=1024), tok, 0).eval()
    tokens, default = MOVE_TOKENS[game]
    head = torch.nn.Linear(model.lm_head.in_features, model.lm_head.out_features, bias=True)
    with torch.no_grad():
        head.weight.copy_(model.lm_head.weight)
        head.bias.zero_()
        head.bias[tok.convert_tokens_to_ids(tokens)] = default if lean is None else lean
    model.lm_head = head
    return model, tok


@pytest.fixture(scope="module")
def game_policy():
    return leaning_policy("tictactoe")


@pytest.mark.parametrize("game", ["tictactoe", "kuhn_poker"])
def test_both_seats_episodes_are_token_exact_against_the_environments_text(game):
    model, tok = leaning_policy(game)
    task = make_tasks([TaskConfig(name=game)], 0)[0]
    engine = RecordingEngine(model, tok)
    torch.manual_seed(3)
    prompts, groups = EpisodeRunner(engine, PromptEncoder(tok)).play(
        [(task, task.problem("train", i)) for i in range(4)], SamplingParams(n=4, max_new_tokens=5))
    sampled = {}
    for call_prompts, outs in engine.calls:
        for p, conts in zip(call_prompts, outs):
            sampled.setdefault(tuple(p), []).extend(conts)
    seats, longest, second_moved = set(), 0, False
    for prompt, episodes in zip(prompts, groups):
        for m in range(2):  # episodes 2m and 2m+1 are the two seats of match m
            x, o = episodes[2 * m], episodes[2 * m + 1]
            assert (x.role, o.role) == ("seat0", "seat1") and x.reward == -o.reward  # zero-sum
        for ep in episodes:
            seats.add(ep.role)
            longest = max(longest, ep.turns)
            second_moved = second_moved or (ep.role == "seat1" and ep.turns > 0)
            # the conversation the seat had, each assistant turn spelled by exactly the tokens it sampled
            turns = iter(policy_runs(ep))
            conversation = [{"role": "user", "content": task.task.game.rules}] + [
                {"role": "assistant", "content": tok.decode([t for t in next(turns) if t != tok.eos_token_id])}
                if m["role"] == "assistant" else m for m in ep.messages]
            text = tok.apply_chat_template(conversation, tokenize=False)
            shown = tok.decode(prompt + ep.token_ids)
            # the sequence is the template's rendering of what the seat saw and said (a turn cut at the token limit
            # lacks only the end-of-turn the template writes after it)
            assert text == shown or text == shown + "<|im_end|>\n"
            assert_policy_runs_were_sampled(prompt, ep.token_ids, ep.policy_mask, sampled)
            # the first tokens are the environment's (the seat is told its side before it moves)
            assert ep.token_ids == [] or not ep.policy_mask[0]
    # the second seat moved after awaiting the first's move; TicTacToe matches went on past a move a seat
    assert seats == {"seat0", "seat1"} and second_moved and longest >= (2 if game == "tictactoe" else 1)


def test_a_seat_that_runs_out_of_budget_forfeits_and_frees_the_other(game_policy):
    model, tok = game_policy
    task = EnvTask(make_task("tictactoe", 0, {}), EnvConfig(name="tictactoe", max_turns=5, max_tokens=60))
    _, groups = EpisodeRunner(RecordingEngine(model, tok), PromptEncoder(tok)).play(
        [(task, task.problem("train", 0))], SamplingParams(n=2, max_new_tokens=8))
    x, o = groups[0]
    metrics = [x.fields["episode_metrics"], o.fields["episode_metrics"]]
    assert sum(m["out_of_budget"] + m["illegal_move"] for m in metrics) == 1  # one seat lost the match so
    assert sorted([x.reward, o.reward]) == [-1.0, 1.0]


def test_a_match_against_a_frozen_checkpoint(game_policy, tmp_path):
    model, tok = game_policy
    save_pretrained(model, tok, tmp_path / "frozen")
    task = make_tasks([TaskConfig(name="tictactoe", args={"opponent": str(tmp_path / "frozen")})], 0)[0]
    _, groups = EpisodeRunner(RecordingEngine(model, tok), PromptEncoder(tok)).play(
        [(task, task.problem("train", 0))], SamplingParams(n=4, max_new_tokens=4))
    assert [e.role for e in groups[0]] == ["seat0", "seat1", "seat0", "seat1"]  # each episode one seat
    for e in groups[0]:
        m = e.fields["episode_metrics"]
        assert m["illegal_move"] + m["opponent_illegal_move"] + m["moves"] >= 1  # someone moved or lost by it
    with pytest.raises(ConfigError, match="not an opponent"):
        make_task("tictactoe", 0, {"opponent": str(tmp_path / "missing")})
    with pytest.raises(ConfigError, match="not an opponent for tictactoe"):
        make_task("tictactoe", 0, {"eval_opponent": "equilibrium"})  # TicTacToe has no equilibrium player


class PlainDecodeModels:
    """The reference for the checkpoint opponent: each move's tokens drawn one at a time from a full forward of the
    model (no cache, no engine) at temperature 1, from the conversation's generator seeded as the opponent seeds it
    (how the opponent decoded inside rlvr.envs before it played through a rollout engine). Remembers its replies
    (with the length of the conversation they answer)."""

    def __init__(self, model, tok):
        self.model, self.tok, self.replies = model, tok, []

    def open(self, model_dir, seed, max_new_tokens):
        generator = torch.Generator().manual_seed(seed)
        models = self

        class Chat:
            def reply(self, messages):
                text = models.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
                ids, out = models.tok(text, add_special_tokens=False)["input_ids"], []
                for _ in range(max_new_tokens):
                    with torch.no_grad():
                        logits = models.model(input_ids=torch.tensor([ids + out])).logits[0, -1]
                    token = int(torch.multinomial(logits.float().softmax(-1), 1, generator=generator))
                    if token == models.tok.eos_token_id:
                        break
                    out.append(token)
                models.replies.append((len(messages), models.tok.decode(out, skip_special_tokens=True)))
                return models.replies[-1][1]

        return Chat()


class RecordingChatModels(EngineChatModels):
    """The runner's chat models, remembering every reply (with the length of the conversation it answers)."""

    def __init__(self):
        self.replies = []

    def open(self, model_dir, seed, max_new_tokens):
        chat, replies = super().open(model_dir, seed, max_new_tokens), self.replies

        class Recorded:
            def reply(self, messages):
                replies.append((len(messages), chat.reply(messages)))
                return replies[-1][1]

        return Recorded()


def test_the_checkpoint_opponent_plays_through_the_hf_engine_the_moves_a_plain_decode_of_it_samples(tmp_path):
    model, tok = leaning_policy("tictactoe")
    save_pretrained(model, tok, tmp_path / "frozen")
    task = make_tasks([TaskConfig(name="tictactoe", args={"opponent": str(tmp_path / "frozen")})], 0)[0]
    work = [(task, task.problem("train", i)) for i in range(4)]

    def play(models):
        generators = [group_generator(torch.device("cpu"), 5, g) for g in range(len(work))]
        _, groups = EpisodeRunner(RecordingEngine(model, tok), PromptEncoder(tok), models).play(
            work, SamplingParams(n=4, max_new_tokens=4), generators)
        return [(e.token_ids, e.messages) for g in groups for e in g]

    frozen_model.cache_clear()
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "frozen").eval()  # no output-layer bias: not `model`
    through_engine, reference = RecordingChatModels(), PlainDecodeModels(saved, tok)
    assert play(through_engine) == play(reference)
    assert through_engine.replies == reference.replies and len(reference.replies) >= 12  # the same moves, many
    assert max(length for length, _ in reference.replies) >= 4  # a second move, answering its own first one
    engine, _ = frozen_model(str((tmp_path / "frozen").resolve()))
    assert isinstance(engine, HFRolloutEngine) and frozen_model.cache_info().currsize == 1  # loaded once


def test_a_match_against_a_checkpoint_is_set_up_without_loading_it_and_plays_only_through_a_runner(game_policy,
                                                                                                   tmp_path):
    model, tok = game_policy
    save_pretrained(model, tok, tmp_path / "frozen")
    frozen_model.cache_clear()
    task = make_tasks([TaskConfig(name="tictactoe", args={"opponent": str(tmp_path / "frozen")})], 0)[0]
    x, o = task.make_envs(task.problem("train", 0), 2)  # x plays seat 0 (the policy moves first), o seat 1
    assert frozen_model.cache_info().misses == 0  # neither the task nor the matches loaded the checkpoint
    assert "You are X." in x.reply().messages[0]["content"]
    with pytest.raises(RlvrError, match="built without chat models"):
        o.reply()  # the checkpoint's first move as X, outside an episode runner


def test_no_environment_decodes_with_a_model_of_its_own():
    """Models run in the rollout engines only: no module of rlvr.envs touches logits, a cache or torch."""
    import re
    from pathlib import Path

    import rlvr.envs

    for path in Path(rlvr.envs.__file__).parent.glob("*.py"):
        assert not re.search(r"logits|past_key_values|DynamicCache|\btorch\b", path.read_text()), path


def test_game_settings_that_cannot_work_are_named():
    with pytest.raises(ConfigError, match="needs up to 5 turns"):
        make_tasks([TaskConfig(name="tictactoe", env={"name": "tictactoe", "max_turns": 3})], 0)
    task = make_tasks([TaskConfig(name="kuhn_poker")], 0)[0]
    with pytest.raises(ConfigError, match="even number of samples"):
        task.make_envs(task.problem("train", 0), 3)
    with pytest.raises(ConfigError, match="derives follow-up problems.*max_staleness=0"):
        make_collector(1, data=None, tasks=[make_task("absolute_zero", 0, {})])


@ENVIRONMENTS.register("test_awaits_forever")
class AwaitsForever(Environment):
    starts_awaiting_reply = True

    def step(self, text):
        return EnvStep(done=True)

    def reply(self):
        return None

    def outcome(self):
        return Outcome(0.0, False)


def test_episodes_that_all_await_a_reply_are_a_clear_error(game_policy):
    model, tok = game_policy
    task = EnvTask(make_task("arithmetic", 0, {"max_operand": 9}), EnvConfig(name="test_awaits_forever"))
    with pytest.raises(RlvrError, match="awaits a reply that never comes"):
        EpisodeRunner(RecordingEngine(model, tok), PromptEncoder(tok)).play(
            [(task, task.problem("train", 0))], SamplingParams(n=2, max_new_tokens=4))


def test_random_players_finish_every_match():
    rng = random.Random(0)
    for game in (TicTacToe, KuhnPoker):
        for _ in range(50):
            match = played(Match(game(rng), [RandomPlayer(rng), RandomPlayer(rng)]))
            assert match.over and sum(match.returns()) == 0 and match.illegal == [0, 0]


# ------------------------------------------------------------------ the trainer: roles, metrics, exact resume


def self_play_config(fast_config, root, steps, **extra):
    """Absolute Zero (two task types, a buffer seeded with 4 programs, 2 solve problems a type topped up from it)
    and TicTacToe self-play in one run, role baselines, writing to root/run."""
    root.mkdir(parents=True, exist_ok=True)
    seeds = root / "seed_tasks.jsonl"
    seeds.write_text("".join(json.dumps({"program": f"def f(a):\n    return a * {k} - 1", "input": str(k)}) + "\n"
                             for k in range(2, 6)))
    return fast_config(**{
        "steps": steps, "model": {"tiny": {"max_position_embeddings": 1024, "vocab_size": 160}},
        "data": {"tasks": [{"name": "absolute_zero", "label": "azr",
                            "args": {"types": ["deduction", "abduction"], "min_solve": 2, "seed_tasks": str(seeds),
                                     "eval_size": 4}},
                           {"name": "tictactoe", "args": {"eval_size": 4}}], "prompts_per_step": 4},
        "rollout": {"max_new_tokens": 6}, "algorithm": {"advantage": "role_baseline"},
        "checkpoint": {"every_steps": 2},
        "tracking": {"output_dir": str(root / "run"), "log_completions_every": 1, "log_completions_groups": 20,
                     "console": False, "tensorboard": "off", "report": False},
        **extra})


def test_self_play_trains_with_roles_and_a_resumed_run_takes_exactly_the_next_step(fast_config, tmp_path):
    whole = self_play_config(fast_config, tmp_path / "a", 3)
    Trainer(RunConfig.model_validate(whole)).fit()
    a, b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    rows = read_jsonl(a / "metrics.jsonl")
    for role in ("azr/deduction.propose", "azr/deduction.solve", "azr/abduction.solve", "tictactoe/seat0",
                 "tictactoe/seat1"):
        assert any(r.get(f"role/{role}/samples", 0) > 0 for r in rows), role
    assert rows[-1]["task/azr/buffer/deduction"] == 5 and rows[-1]["task/azr/proposals"] > 0
    completions = read_jsonl(a / "completions.jsonl")
    assert {"seat0", "seat1"} <= {r["role"] for r in completions}
    assert any(r["role"].endswith(".solve") for r in completions)

    # the same run stopped after step 2 and resumed: step 3 is the uninterrupted run's step 3
    first = self_play_config(fast_config, tmp_path / "b", 2)
    Trainer(RunConfig.model_validate(first)).fit()
    Trainer(RunConfig.model_validate({**first, "steps": 3}), resume="auto").fit()
    keys = ("reward/mean", "actor/loss", "task/azr/proposals", "role/tictactoe/seat0/reward",
            "role/azr/deduction.solve/reward")
    step3 = [{k: r.get(k) for k in keys} for r in (read_jsonl(run / "metrics.jsonl")[-1] for run in (a, b))]
    assert step3[0] == step3[1] and step3[0]["actor/loss"] is not None
    done = [[(r["uid"], r.get("role"), r["completion"]) for r in read_jsonl(run / "completions.jsonl") if r["step"] == 3]
            for run in (a, b)]
    assert done[0] == done[1] and done[0]


def test_the_static_engines_kept_cache_plays_seats_awaiting_replies_as_re_encoding_does():
    from rlvr.rollout.static import StaticCacheEngine

    model, tok = leaning_policy("tictactoe")
    task = make_tasks([TaskConfig(name="tictactoe")], 0)[0]
    engine = StaticCacheEngine(model, tok, batch_size=64)

    def play(keep):
        engine.keep_turns = keep
        generators = [group_generator(torch.device("cpu"), 7, g) for g in range(6)]
        _, groups = EpisodeRunner(engine, PromptEncoder(tok)).play(
            [(task, task.problem("train", i)) for i in range(6)], SamplingParams(n=4, max_new_tokens=5), generators)
        return [e for g in groups for e in g]

    fresh, kept = play(False), play(True)
    assert max(e.turns for e in fresh) >= 2  # seats awaited their replies and went on
    assert [e.token_ids for e in kept] == [e.token_ids for e in fresh]
    assert [e.policy_mask for e in kept] == [e.policy_mask for e in fresh]
