"""The strongest simple baselines a learning claim is read against, computed exactly from the environments' own
rules on the same held-out sets the runs are evaluated on (docs/results.md prints them beside each claim).

- TicTacToe: a uniformly random legal player and a fixed legal heuristic (the lowest empty square), each against
  the random opponent: exactly over the game tree, and on the held-out matches of the task (their deals, seats and
  the opponent's own random stream, the policy's random moves averaged exactly).
- Kuhn poker: the exact chips per hand of a strategy against Kuhn's equilibrium player (alpha 1/6), per seat; a
  uniformly random legal player and a fixed card heuristic (bet or call with the king only); the game's value is
  -1/18 for player 1.
- Guess-the-number: the best blind strategy on the held-out secrets (the most frequent secrets, guessed in turn),
  counting upward from 1, and binary search, each played through the environment.
- FrozenLake: a uniformly random move each turn (its exact success within the turn budget) and the shortest walk,
  on the held-out maps.
- Absolute Zero: answering every held-out question with its own input (echo) and with one constant per family.
"""

from __future__ import annotations

import ast
import copy
import random
from collections import Counter
from collections.abc import Callable
from fractions import Fraction

from rlvr.envs.frozen_lake import MOVES, FrozenLakeTask, distances_to_goal, find, parse_lake, step_from
from rlvr.envs.guess_number import GuessNumberEnvironment, GuessNumberTask
from rlvr.envs.kuhn_poker import CARDS, KuhnEquilibrium
from rlvr.envs.tictactoe import TicTacToe, TicTacToeEnvironment, TicTacToeTask
from rlvr.envs.two_player import Match

# A TicTacToe baseline: the moves it may play and their probabilities, from the legal moves.
MovePolicy = Callable[[list[str]], dict[str, Fraction]]


def random_legal(legal: list[str]) -> dict[str, Fraction]:
    """A uniformly random legal move."""
    return {m: Fraction(1, len(legal)) for m in legal}


def lowest_empty(legal: list[str]) -> dict[str, Fraction]:
    """The lowest-numbered empty square, always."""
    return {min(legal, key=int): Fraction(1)}


def tictactoe_vs_random(policy: MovePolicy, seat: int) -> Fraction:
    """The exact probability that `policy` playing `seat` (0: X, 1: O) wins or draws against a uniformly random
    legal opponent, over the whole game tree (the game's own rules)."""

    seen: dict[tuple[str, ...], Fraction] = {}

    def value(game: TicTacToe) -> Fraction:
        key = tuple(game.board)  # the board decides the rest of the game
        if key not in seen:
            seen[key] = expand(game)
        return seen[key]

    def expand(game: TicTacToe) -> Fraction:
        mover = game.to_move()
        if mover is None:
            return Fraction(int(game.returns()[seat] >= 0))
        legal = game.legal_moves()
        moves = policy(legal) if mover == seat else random_legal(legal)
        total = Fraction(0)
        for move, p in moves.items():
            game.play(move)
            total += p * value(game)
            game.board[int(move) - 1] = ""  # take the move back
            game.history.pop()
        return total

    return value(TicTacToe(random.Random(0)))


def tictactoe_heldout(policy: MovePolicy, eval_size: int = 60) -> dict[str, Fraction]:
    """Win-or-draw per seat of `policy` on the task's held-out matches against the random opponent (seat i % 2 in
    match i, the opponent's moves from its own seeded stream, as the evaluation plays them); a random policy's rate
    is its exact expectation over its own moves."""
    task = TicTacToeTask(eval_opponent="random", eval_size=eval_size)
    rates: dict[int, list[Fraction]] = {0: [], 1: []}
    for i in range(eval_size):
        (env,) = TicTacToeEnvironment.for_group(task.problem("eval", i), task, 1, models=None)
        env.match.advance()
        rates[env.seat].append(_match_value(env.match, env.seat, policy))
    return {f"seat{s}": sum(v, Fraction(0)) / len(v) for s, v in rates.items()}


def _match_value(match: Match, seat: int, policy: MovePolicy) -> Fraction:
    if match.over:
        return Fraction(int(match.returns()[seat] >= 0))
    total = Fraction(0)
    for move, p in policy(match.game.legal_moves()).items():
        child = copy.deepcopy(match)  # the opponent's random stream is copied with it
        child.move(seat, move)
        total += p * _match_value(child, seat, policy)
    return total


# ------------------------------------------------------------------------------------------------- Kuhn poker

# A Kuhn strategy: the probability of the aggressive action (bet, or call when facing a bet) at each decision,
# keyed (seat, card, actions so far).
KuhnStrategy = Callable[[int, str, tuple[str, ...]], Fraction]


def kuhn_random(seat: int, card: str, actions: tuple[str, ...]) -> Fraction:
    """A uniformly random legal action."""
    return Fraction(1, 2)


def kuhn_king_only(seat: int, card: str, actions: tuple[str, ...]) -> Fraction:
    """Bet or call with the king, check or fold otherwise."""
    return Fraction(int(card == "K"))


def kuhn_equilibrium(seat: int, card: str, actions: tuple[str, ...]) -> Fraction:
    """Kuhn's equilibrium (alpha 1/6), the environment's own player."""
    aggressive = "bet" if actions in ((), ("check",)) else "call"
    return KuhnEquilibrium(random.Random(0)).policy(card, actions)[aggressive]


def kuhn_value(strategy: KuhnStrategy, seat: int) -> Fraction:
    """The exact expected chips per hand of `strategy` in `seat` against the equilibrium player, over the 6 deals."""
    total = Fraction(0)
    for mine in CARDS:
        for theirs in CARDS:
            if mine != theirs:
                cards = (mine, theirs) if seat == 0 else (theirs, mine)
                total += _kuhn_node(cards, (), strategy, seat)
    return total / 6


def _kuhn_node(cards: tuple[str, str], actions: tuple[str, ...], strategy: KuhnStrategy, seat: int) -> Fraction:
    ends = {("check", "check"): 1, ("bet", "call"): 2, ("check", "bet", "call"): 2}
    folds = {("bet", "fold"): 0, ("check", "bet", "fold"): 1}  # the seat that wins the ante
    if actions in ends:
        stake = ends[actions] * (1 if CARDS.index(cards[0]) > CARDS.index(cards[1]) else -1)
        return Fraction(stake if seat == 0 else -stake)
    if actions in folds:
        return Fraction(1 if folds[actions] == seat else -1)
    mover = len(actions) % 2
    p = strategy(mover, cards[mover], actions) if mover == seat else kuhn_equilibrium(mover, cards[mover], actions)
    aggressive, passive = ("bet", "check") if actions in ((), ("check",)) else ("call", "fold")
    return (p * _kuhn_node(cards, (*actions, aggressive), strategy, seat)
            + (1 - p) * _kuhn_node(cards, (*actions, passive), strategy, seat))


# ---------------------------------------------------------------------------------------------- guess-the-number


def guess_number_secrets(high: int = 20, eval_size: int = 40) -> list[int]:
    """The held-out secrets of the guess_number task (they do not depend on the seed)."""
    task = GuessNumberTask(high=high, eval_size=eval_size)
    return [int(task.problem("eval", i).answer) for i in range(eval_size)]


def guess_number_success(player: Callable[[int, int, list[int]], int], high: int = 20, eval_size: int = 40,
                         turns: int = 5) -> Fraction:
    """The share of the held-out games a player wins within `turns` guesses, played through the environment;
    `player(low, high, guesses)` names the next guess from the interval the replies left and its earlier guesses."""
    task = GuessNumberTask(high=high, eval_size=eval_size)
    won = 0
    for i in range(eval_size):
        env = GuessNumberEnvironment(task.problem("eval", i), task)
        low, top, guesses = 1, high, []
        for _ in range(turns):
            guess = player(low, top, guesses)
            guesses.append(guess)
            step = env.step(str(guess))
            if step.done:
                break
            reply = step.messages[0]["content"]
            low, top = (max(low, guess + 1), top) if reply == "higher" else (low, min(top, guess - 1))
        won += env.outcome().success
    return Fraction(won, eval_size)


def blind_guesses(order: list[int]) -> Callable[[int, int, list[int]], int]:
    """A player deaf to the replies: it guesses `order` in turn."""
    return lambda low, high, guesses: order[len(guesses)]


def binary_search(low: int, high: int, guesses: list[int]) -> int:
    """The middle of the interval the replies left."""
    return (low + high) // 2


def best_blind_order(secrets: list[int], turns: int = 5) -> list[int]:
    """The blind guesses that win most held-out games: the `turns` most frequent secrets (ties to the lower)."""
    counts = Counter(secrets)
    return sorted(counts, key=lambda s: (-counts[s], s))[:turns]


# ---------------------------------------------------------------------------------------------------- FrozenLake


def frozen_lake_random_walk(task_args: dict, turns: int) -> Fraction:
    """The exact share of the held-out maps a uniformly random move per turn walks to the goal within `turns` moves
    (the environment's moves: off the grid stays, a hole ends the walk), averaged over the maps."""
    task = FrozenLakeTask(**task_args)
    total = Fraction(0)
    for i in range(task.eval_size):
        rows = parse_lake(task.problem("eval", i).answer)
        alive = {find(rows, "S"): Fraction(1)}  # where the walker stands, not yet in a hole or at the goal
        for _ in range(turns):
            nxt: dict[tuple[int, int], Fraction] = {}
            for at, p in alive.items():
                for move in MOVES:
                    to = step_from(rows, at, move)
                    cell = rows[to[0]][to[1]]
                    if cell == "G":
                        total += p / len(MOVES)
                    elif cell != "H":
                        nxt[to] = nxt.get(to, Fraction(0)) + p / len(MOVES)
            alive = nxt
    return total / task.eval_size


def frozen_lake_shortest(task_args: dict, turns: int) -> Fraction:
    """The share of the held-out maps whose shortest safe walk fits in `turns` moves (a player that reads the grid
    and walks it wins these)."""
    task = FrozenLakeTask(**task_args)
    lakes = [parse_lake(task.problem("eval", i).answer) for i in range(task.eval_size)]
    return Fraction(sum(distances_to_goal(rows).get(find(rows, "S"), turns + 1) <= turns for rows in lakes),
                    task.eval_size)


# ------------------------------------------------------------------------------------------------- Absolute Zero


def _value(text: str):
    return ast.literal_eval(text)


def echo_solved(rows: list[dict]) -> int:
    """Held-out program-output questions whose output is the program's own input (a single argument): answering
    each with its input solves them."""
    return sum(_value(r["output"]) == _value(r["input"]) and type(_value(r["output"])) is type(_value(r["input"]))
               for r in rows)


def family(row: dict) -> str:
    """A held-out question's family: its id without the instance number ('add-3' -> 'add')."""
    return row["id"].rsplit("-", 1)[0]


def constant_solved(rows: list[dict]) -> tuple[str, int, int]:
    """The best single constant answer for every question (its repr, the questions it solves), and the questions
    solved by the best constant chosen per family (each family's most frequent output)."""
    outputs = Counter(repr(_value(r["output"])) for r in rows)
    best, hits = max(outputs.items(), key=lambda kv: (kv[1], kv[0]))
    per_family: dict[str, Counter] = {}
    for r in rows:
        per_family.setdefault(family(r), Counter())[repr(_value(r["output"]))] += 1
    return best, hits, sum(c.most_common(1)[0][1] for c in per_family.values())
