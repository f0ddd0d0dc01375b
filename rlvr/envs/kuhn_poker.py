"""Kuhn poker (Kuhn 1950) as a two-player environment (rlvr.envs.two_player; SPIRAL's second game). Three cards
J < Q < K, one dealt to each player, each antes 1 chip. Player 1 (seat0) checks or bets 1; facing a bet a player
calls or folds; after check-check or a called bet the higher card takes the pot. A reply's move is the first legal
action word in it; a reply naming none is an illegal move and costs 2 chips (the most a hand can lose).

Under equilibrium play the game's value is -1/18 per hand for player 1 (+1/18 for player 2); `equilibrium` is
Kuhn's equilibrium family with bluffing parameter alpha in [0, 1/3] (`KuhnEquilibrium`), against which no strategy
of player 1 does better than -1/18, nor of player 2 better than +1/18."""

from __future__ import annotations

import random
import re
from fractions import Fraction

from rlvr.envs.base import ENVIRONMENTS
from rlvr.envs.two_player import Game, GameTask, Match, Player, SeatEnvironment
from rlvr.tasks.base import TASKS

CARDS = ("J", "Q", "K")
GAME_VALUE = Fraction(-1, 18)  # player 1's expected chips per hand under equilibrium play
ACTIONS = {(): ("check", "bet"), ("check",): ("check", "bet"), ("bet",): ("call", "fold"),
           ("check", "bet"): ("call", "fold")}
PAST = {"check": "checked", "bet": "bet", "call": "called", "fold": "folded"}


def payoff(cards: tuple[str, str], actions: tuple[str, ...]) -> int:
    """Player 1's chips won in a finished hand."""
    showdown = 1 if CARDS.index(cards[0]) > CARDS.index(cards[1]) else -1
    if actions == ("check", "check"):
        return showdown
    if actions[-1] == "fold":
        return 1 if len(actions) % 2 == 0 else -1  # the folder loses its ante; the other wins it
    return 2 * showdown  # a called bet


class KuhnPoker(Game):
    name = "kuhn_poker"
    rules = ("Let's play Kuhn poker: cards J < Q < K, one each, and both players ante 1 chip. Player 1 acts first: "
             "check or bet 1 chip; facing a bet, call or fold. After two checks or a called bet, the higher card "
             "wins the pot. Reply with one of the actions offered; any other reply loses 2 chips.")
    seat_names = ("player 1", "player 2")
    forfeit = 2.0

    def __init__(self, rng: random.Random):
        super().__init__(rng)
        self.cards = tuple(rng.sample(CARDS, 2))
        self.actions: tuple[str, ...] = ()

    def to_move(self) -> int | None:
        return None if self.actions not in ACTIONS else len(self.actions) % 2

    def legal_moves(self) -> list[str]:
        return list(ACTIONS[self.actions])

    def parse(self, text: str) -> str | None:
        found = [(m.start(), m.group().lower()) for action in self.legal_moves()
                 for m in re.finditer(rf"\b{action}\b", text, re.IGNORECASE)]
        return min(found)[1] if found else None

    def apply(self, move: str) -> None:
        self.actions += (move,)

    def returns(self) -> tuple[float, float]:
        won = payoff(self.cards, self.actions)
        return float(won), float(-won)

    def state(self, seat: int) -> str:
        return f"Your card is {self.cards[seat]}."

    def news(self, seat: int, move: str) -> str:
        return f"{self.seat_names[seat].capitalize()} {PAST[move]}."

    @staticmethod
    def equilibrium_player(rng: random.Random) -> Player:
        return KuhnEquilibrium(rng)


class KuhnEquilibrium(Player):
    """Kuhn's equilibrium strategies. Player 1: with J bet with probability alpha, else check and fold to a bet;
    with Q check, and call a bet with probability alpha + 1/3; with K bet with probability 3 alpha, else check and
    call. Player 2: facing a bet, call with K, with Q with probability 1/3, fold J; after a check, bet with K, with
    J with probability 1/3, check Q."""

    def __init__(self, rng: random.Random, alpha: Fraction = Fraction(1, 6)):
        if not 0 <= alpha <= Fraction(1, 3):
            raise ValueError(f"alpha must be in [0, 1/3], got {alpha}")
        self.rng, self.alpha = rng, alpha

    def policy(self, card: str, actions: tuple[str, ...]) -> dict[str, Fraction]:
        """The probability of each legal action with `card` after `actions`."""
        a, third = self.alpha, Fraction(1, 3)
        table = {
            ((), "J"): {"bet": a}, ((), "Q"): {"bet": Fraction(0)}, ((), "K"): {"bet": 3 * a},
            (("check", "bet"), "J"): {"call": Fraction(0)}, (("check", "bet"), "Q"): {"call": a + third},
            (("check", "bet"), "K"): {"call": Fraction(1)},
            (("bet",), "J"): {"call": Fraction(0)}, (("bet",), "Q"): {"call": third}, (("bet",), "K"): {"call": Fraction(1)},
            (("check",), "J"): {"bet": third}, (("check",), "Q"): {"bet": Fraction(0)},
            (("check",), "K"): {"bet": Fraction(1)},
        }
        (first, p), = table[(actions, card)].items()
        other = next(x for x in ACTIONS[actions] if x != first)
        return {first: p, other: 1 - p}

    def reply(self, match: Match, seat: int) -> str:
        game = match.game
        probs = self.policy(game.cards[seat], game.actions)
        draw, total = self.rng.random(), Fraction(0)
        for action, p in probs.items():
            total += p
            if draw < total:
                return action
        return next(iter(probs))


@ENVIRONMENTS.register("kuhn_poker")
class KuhnPokerEnvironment(SeatEnvironment):
    """One seat (player 1 = seat0, player 2 = seat1) of a Kuhn poker hand; the opponent is the problem's. Success:
    the hand won (chips > 0); metrics also give the chips (`return`) per seat."""

    game = KuhnPoker
    turns_needed = 2
    corpus_hint = ("You are player 1.", "You are player 2.", "Your card is K.", "Player 1 checked.", "Player 2 bet.",
                   "Your move: check or bet.", "Your move: call or fold.")

    def won_or_drew(self, mine: float) -> bool:
        return mine > 0


@TASKS.register("kuhn_poker")
class KuhnPokerTask(GameTask):
    """Kuhn poker hands (args: opponent: self | random | equilibrium | <checkpoint dir>, eval_opponent: random |
    equilibrium | <checkpoint dir>, eval_size). Self-play by default; evaluation against Kuhn's equilibrium player,
    alternating seats."""

    name = "kuhn_poker"
    game = KuhnPoker
    environment = {"name": "kuhn_poker", "max_turns": 2, "max_tokens": 256}

    def __init__(self, seed: int = 0, opponent: str = "self", eval_opponent: str = "equilibrium", eval_size: int = 240):
        super().__init__(seed, opponent, eval_opponent, eval_size)
