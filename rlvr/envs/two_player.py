"""Two-player zero-sum games as environments (SPIRAL: Liu et al. 2025, "SPIRAL: Self-Play on Zero-Sum Games
Incentivizes Reasoning via Multi-Agent Multi-Turn Reinforcement Learning", arXiv 2506.24119).

Each seat of a match is its own episode: one token sequence of what that seat sees (the rules, then, turn by turn,
the other seat's moves and the state as the environment's replies) and what it plays (its turns). With
`opponent: self` a group's episodes are paired into matches (episodes 2m and 2m+1 are the two seats of match m),
so both seats are played by the current policy in one batch: a seat that has moved waits (`EnvStep(wait=True)`)
until the other seat's move gives it its reply. Otherwise every episode plays one seat (alternating within the
group, or the problem's `seat`) against a fixed player: `random` legal moves, the game's `equilibrium` player where
it has one, or a frozen checkpoint (a saved model directory) that plays its seat from the same observations.

A reply that names no legal move is an illegal move: the match ends at once and the offender loses `forfeit` (the
other seat wins as much), counted as `illegal_move`; a seat whose episode runs out of tokens or turns forfeits the
same way (`out_of_budget`).
"""

from __future__ import annotations

import functools
import random
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from rlvr.envs.base import Environment, EnvStep, Message, Outcome
from rlvr.errors import ConfigError
from rlvr.models.kv_cache import cache_keyword
from rlvr.tasks.base import Problem, Task

SELF = "self"


class Game(ABC):
    """The rules and state of a two-player zero-sum game; seat 0 moves first. A game is built from a random
    generator (the deal) and told moves by `play`; it words what each seat sees."""

    name: str
    rules: str  # the opening message, the same for both seats
    seat_names: tuple[str, str]
    forfeit: float  # what an illegal move costs the offender (the other seat wins as much)

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.history: list[tuple[int, str]] = []  # (seat, move)

    @abstractmethod
    def to_move(self) -> int | None:
        """The seat to move, None once the game is over."""

    @abstractmethod
    def legal_moves(self) -> list[str]:
        """The moves the seat to move may play."""

    @abstractmethod
    def parse(self, text: str) -> str | None:
        """The legal move a reply names, None when it names none."""

    @abstractmethod
    def apply(self, move: str) -> None:
        """Change the state by a legal move of the seat to move."""

    @abstractmethod
    def returns(self) -> tuple[float, float]:
        """Each seat's payoff once the game is over (they sum to 0)."""

    @abstractmethod
    def state(self, seat: int) -> str:
        """What `seat` sees of the state (the board, its card)."""

    @abstractmethod
    def news(self, seat: int, move: str) -> str:
        """How the other seat hears of `seat`'s move."""

    def play(self, move: str) -> None:
        seat = self.to_move()
        self.apply(move)
        self.history.append((seat, move))

    def prompt_for_move(self) -> str:
        return f"Your move: {' or '.join(self.legal_moves())}."


class Player(ABC):
    """A fixed player of one seat: its reply text on its turn."""

    @abstractmethod
    def reply(self, match: Match, seat: int) -> str: ...


class RandomPlayer(Player):
    """A uniformly random legal move."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def reply(self, match: Match, seat: int) -> str:
        return self.rng.choice(match.game.legal_moves())


class Match:
    """One game between two seats, each a policy episode (None) or a fixed `Player`. Fixed players move as soon
    as it is their turn; `observation` words, for a seat, what happened since it was last told."""

    def __init__(self, game: Game, players: list[Player | None]):
        self.game, self.players = game, players
        self.told = [0, 0]  # how much of the history each seat has been told
        self.greeted = [False, False]
        self.forfeited: int | None = None  # the seat that lost by an illegal move or by running out of budget
        self.illegal = [0, 0]
        self.out_of_budget = [0, 0]
        self.moves = [0, 0]
        self.advance()

    @property
    def over(self) -> bool:
        return self.forfeited is not None or self.game.to_move() is None

    def to_move(self) -> int | None:
        return None if self.over else self.game.to_move()

    def move(self, seat: int, text: str) -> None:
        """`seat` replies `text` on its turn: its move is played, or it forfeits when the text names none."""
        if self.to_move() != seat:
            raise RuntimeError(f"seat {seat} moved out of turn in {self.game.name}")
        move = self.game.parse(text)
        if move is None:
            self.illegal[seat] = 1
            self.forfeited = seat
            return
        self.game.play(move)
        self.moves[seat] += 1
        self.advance()

    def advance(self) -> None:
        """Fixed players move until a policy seat is to move or the game is over."""
        while (seat := self.to_move()) is not None and self.players[seat] is not None:
            self.move(seat, self.players[seat].reply(self, seat))

    def abandon(self, seat: int) -> None:
        """`seat` cannot move (its episode's budget ran out): it forfeits."""
        if not self.over:
            self.out_of_budget[seat] = 1
            self.forfeited = seat

    def returns(self) -> tuple[float, float]:
        if self.forfeited is not None:
            loss = -self.game.forfeit
            return (loss, -loss) if self.forfeited == 0 else (-loss, loss)
        return self.game.returns()

    def observation(self, seat: int) -> str:
        """For `seat` on its turn: who it is (the first time), the other seat's moves since it last heard, the
        state and the moves it may play."""
        lines = []
        if not self.greeted[seat]:
            self.greeted[seat] = True
            lines.append(f"You are {self.game.seat_names[seat]}.")
        lines += [self.game.news(mover, move) for mover, move in self.game.history[self.told[seat]:] if mover != seat]
        self.told[seat] = len(self.game.history)
        lines += [self.game.state(seat), self.game.prompt_for_move()]
        return "\n".join(line for line in lines if line)


class SeatEnvironment(Environment):
    """One seat of a match as an episode (see the module's docstring). Subclasses name the `game`; the problem's
    fields name the opponent (`self`, `random`, `equilibrium`, or a checkpoint directory), the deal's seed and
    optionally the seat."""

    game: type[Game]
    turns_needed: int  # the most turns one seat can take in a match (data.tasks[].env.max_turns must allow it)
    starts_waiting = True  # a seat is told its side and the state before its first turn

    def __init__(self, problem: Problem, task: Task, match: Match, seat: int):
        super().__init__(problem, task)
        self.match, self.seat = match, seat

    @classmethod
    def for_group(cls, problem: Problem, task: Task, n: int, **args: Any) -> list[Environment]:
        if args:
            raise TypeError(f"unexpected arguments {', '.join(sorted(args))} (a game's opponent is the task's "
                            "`opponent` / `eval_opponent` argument)")
        spec = problem.fields.get("opponent", SELF)
        deal = problem.fields.get("deal", problem.uid)
        if spec == SELF:
            if n % 2:
                raise TypeError(f"opponent 'self' pairs a group's episodes into matches, so it needs an even number "
                                f"of samples per prompt (rollout.samples_per_prompt), got {n}")
            envs = []
            for m in range(n // 2):
                match = Match(cls.game(random.Random(f"{cls.game.name}-{deal}-{m}")), [None, None])
                envs += [cls(problem, task, match, 0), cls(problem, task, match, 1)]
            return envs
        envs = []
        for j in range(n):
            seat = int(problem.fields.get("seat", j % 2))
            rng = random.Random(f"{cls.game.name}-{deal}-{j}")
            players: list[Player | None] = [None, None]
            players[1 - seat] = make_player(spec, cls.game, random.Random(f"{cls.game.name}-{deal}-{j}-opponent"))
            envs.append(cls(problem, task, Match(cls.game(rng), players), seat))
        return envs

    @property
    def role(self) -> str:
        return f"seat{self.seat}"

    def reset(self) -> list[Message]:
        return [{"role": "user", "content": self.game.rules}]

    def reply(self) -> EnvStep | None:
        if self.match.over:
            return EnvStep(done=True)
        if self.match.to_move() != self.seat:
            return None
        return EnvStep([{"role": "user", "content": self.match.observation(self.seat)}])

    def step(self, text: str) -> EnvStep:
        self.match.move(self.seat, text)
        return self.reply() or EnvStep(wait=True)

    def abandon(self) -> None:
        self.match.abandon(self.seat)

    def outcome(self) -> Outcome:
        mine = self.match.returns()[self.seat]
        return Outcome(mine, self.won_or_drew(mine))

    def won_or_drew(self, mine: float) -> bool:
        """The episode's success: not lost (TicTacToe); a game without draws overrides it."""
        return mine >= 0

    def metrics(self) -> dict[str, float]:
        """Per episode: win / draw / loss, illegal_move (this seat forfeited by one), out_of_budget, moves, the
        return, and the same under seat<k>/ for this episode's seat only (NaN-free: the other seat's keys are
        absent, so each seat's means are over its own episodes)."""
        mine = self.match.returns()[self.seat]
        own = {"win": float(mine > 0), "draw": float(mine == 0), "loss": float(mine < 0),
               "win_or_draw": float(mine >= 0), "return": mine, "illegal_move": float(self.match.illegal[self.seat]),
               "opponent_illegal_move": float(self.match.illegal[1 - self.seat]),
               "out_of_budget": float(self.match.out_of_budget[self.seat]), "moves": float(self.match.moves[self.seat])}
        return {**own, **{f"{self.role}/{k}": v for k, v in own.items() if k in ("win_or_draw", "return",
                                                                                 "illegal_move")}}


def make_player(spec: str, game: type[Game], rng: random.Random) -> Player:
    """The fixed player an opponent spec names: `random`, `equilibrium` (the game's, where it has one) or a saved
    model directory (a frozen checkpoint)."""
    if spec == "random":
        return RandomPlayer(rng)
    if spec == "equilibrium":
        equilibrium = getattr(game, "equilibrium_player", None)
        if equilibrium is None:
            raise ConfigError(f"{game.name} has no equilibrium player; opponents: self, random, or a checkpoint "
                              "directory.")
        return equilibrium(rng)
    return CheckpointPlayer(spec, rng)


def check_opponent(spec: Any, game: type[Game], field: str, allow_self: bool = True) -> str:
    """`spec` if it names an opponent for `game`, else a ConfigError naming data.tasks[].args.<field>."""
    choices = ["self"] * allow_self + ["random"] + ["equilibrium"] * hasattr(game, "equilibrium_player")
    if spec in choices:
        return spec
    if isinstance(spec, str) and (Path(spec).expanduser() / "config.json").is_file():
        return str(Path(spec).expanduser())
    raise ConfigError(f"data.tasks[].args.{field}={spec!r} is not an opponent for {game.name}: use "
                      f"{', '.join(choices)}, or a saved model directory (a checkpoint, with config.json).")


@functools.lru_cache(maxsize=2)
def _frozen_model(path: str):
    from rlvr.config import ModelConfig
    from rlvr.models.loading import load_model, load_tokenizer

    model = load_model(ModelConfig(name=path, dtype="float32"), name=path).eval().requires_grad_(False)
    return model, load_tokenizer(path)


class CheckpointPlayer(Player):
    """A frozen model playing its seat from the same observations a policy seat gets (its own conversation:
    the rules, each observation, its replies), sampling at temperature 1 from a generator seeded per match, at
    most `max_new_tokens` per turn (a move is a number or a word)."""

    def __init__(self, path: str, rng: random.Random, max_new_tokens: int = 16):
        import torch  # here, not at import: a reward worker imports rlvr.envs and must not pay for torch

        self.model, self.tokenizer = _frozen_model(str(Path(path).resolve()))
        self.generator = torch.Generator().manual_seed(rng.getrandbits(62))
        self.max_new_tokens = max_new_tokens
        self.messages: list[Message] | None = None

    def reply(self, match: Match, seat: int) -> str:
        if self.messages is None:
            self.messages = [{"role": "user", "content": match.game.rules}]
        self.messages.append({"role": "user", "content": match.observation(seat)})
        text = self._sample(self.messages)
        self.messages.append({"role": "assistant", "content": text})
        return text

    def _sample(self, messages: list[Message]) -> str:
        import torch
        from transformers import DynamicCache

        tok = self.tokenizer
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = torch.tensor([tok(ids, add_special_tokens=False)["input_ids"]])
        cache = DynamicCache(config=self.model.config)
        keyword = cache_keyword(self.model)
        out: list[int] = []
        for _ in range(self.max_new_tokens):
            with torch.no_grad():
                logits = self.model(input_ids=ids, use_cache=True, **{keyword: cache}).logits[0, -1]
            token = int(torch.multinomial(logits.float().softmax(-1), 1, generator=self.generator))
            if token == tok.eos_token_id:
                break
            out.append(token)
            ids = torch.tensor([[token]])
        return tok.decode(out, skip_special_tokens=True)


class GameTask(Task):
    """Matches of a game as problems: every problem opens with the rules; its fields name the opponent (train:
    `opponent`, default self-play; eval: `eval_opponent`, each eval problem one seat, alternating) and the deal.
    Played in the game's own environment (data.tasks[].env may set max_tokens and max_turns)."""

    verifier = "rlvr.envs.base:episode_verdict"
    gives_roles = True  # each episode's seat
    game: type[Game]

    def __init__(self, seed: int = 0, opponent: str = SELF, eval_opponent: str = "random", eval_size: int = 200):
        self.seed, self.eval_size = seed, eval_size
        self.opponent = check_opponent(opponent, self.game, "opponent")
        self.eval_opponent = check_opponent(eval_opponent, self.game, "eval_opponent", allow_self=False)
        if eval_size < 0:
            raise TypeError(f"eval_size must be >= 0, got {eval_size}")

    def size(self, split: str) -> int | None:
        return self.eval_size if split == "eval" else None

    def problem(self, split: str, index: int) -> Problem:
        # eval deals do not depend on the seed, so every seed's model is evaluated on the same matches
        fields: dict[str, Any] = {"deal": f"{self.seed}-train-{index}" if split == "train" else f"eval-{index}",
                                  "opponent": self.opponent if split == "train" else self.eval_opponent}
        if split == "eval":
            fields["seat"] = index % 2
        return Problem(uid=f"{split}-{index}", prompt=self.game.rules, fields=fields)

    def final_answer(self, completion: str) -> str | None:
        return None  # a game's turn is judged by the match, not by a stated answer
