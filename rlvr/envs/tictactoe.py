"""TicTacToe as a two-player environment (rlvr.envs.two_player; SPIRAL's first game). Squares are numbered 1-9;
a reply's first number is its move, and a number that is not an empty square (or no number) is an illegal move.
Returns: win +1, draw 0, loss -1; an illegal move loses (-1)."""

from __future__ import annotations

import re

from rlvr.envs.base import ENVIRONMENTS
from rlvr.envs.two_player import Game, GameTask, SeatEnvironment
from rlvr.tasks.base import TASKS

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]
NUMBER = re.compile(r"\d+")


class TicTacToe(Game):
    name = "tictactoe"
    rules = ("Let's play tic-tac-toe on squares 1 to 9. X moves first. On your turn, reply with the number of an empty "
             "square; any other reply loses.")
    seat_names = ("X", "O")
    forfeit = 1.0

    def __init__(self, rng):
        super().__init__(rng)
        self.board = [""] * 9

    def winner(self) -> int | None:
        for a, b, c in LINES:
            if self.board[a] and self.board[a] == self.board[b] == self.board[c]:
                return self.seat_names.index(self.board[a])
        return None

    def to_move(self) -> int | None:
        if self.winner() is not None or all(self.board):
            return None
        return len(self.history) % 2

    def legal_moves(self) -> list[str]:
        return [str(i + 1) for i, mark in enumerate(self.board) if not mark]

    def parse(self, text: str) -> str | None:
        found = NUMBER.search(text)
        square = str(int(found.group())) if found else None  # '08' is square 8
        return square if square in self.legal_moves() else None

    def apply(self, move: str) -> None:
        self.board[int(move) - 1] = self.seat_names[self.to_move()]

    def returns(self) -> tuple[float, float]:
        winner = self.winner()
        if winner is None:
            return 0.0, 0.0
        return (1.0, -1.0) if winner == 0 else (-1.0, 1.0)

    def state(self, seat: int) -> str:
        return "\n".join(" ".join(self.board[r + c] or str(r + c + 1) for c in range(3)) for r in (0, 3, 6))

    def news(self, seat: int, move: str) -> str:
        return f"{self.seat_names[seat]} took square {move}."

    def prompt_for_move(self) -> str:
        return "Your move (the board shows the empty squares' numbers)."


@ENVIRONMENTS.register("tictactoe")
class TicTacToeEnvironment(SeatEnvironment):
    """One seat (X = seat0, O = seat1) of a TicTacToe match; the opponent is the problem's (task args)."""

    game = TicTacToe
    turns_needed = 5
    corpus_hint = ("You are X.", "You are O.", "O took square 5.", "X took square 1.", "1 2 3\n4 5 6\n7 8 9",
                   "Your move (the board shows the empty squares' numbers).")


@TASKS.register("tictactoe")
class TicTacToeTask(GameTask):
    """TicTacToe matches (args: opponent: self | random | <checkpoint dir>, eval_opponent: random | <checkpoint
    dir>, eval_size). Self-play by default; evaluation against a random legal player, alternating seats."""

    name = "tictactoe"
    game = TicTacToe
    environment = {"name": "tictactoe", "max_turns": 5, "max_tokens": 512}
