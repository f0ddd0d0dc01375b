"""FrozenLake as a text game (the grid world RAGEN trains on: Wang et al. 2025, "RAGEN: Understanding Self-Evolution
in LLM Agents via Multi-Turn Reinforcement Learning"): walk from the start to the goal on a grid of ice without
stepping into a hole, one move per turn, the grid shown again after every move.

A lake is a string of rows joined by '/', with S (start), F (frozen ice), H (hole) and G (goal), as gymnasium's
FrozenLake writes its maps ('SFFF/FHFH/FFFH/HFFG'). It is the problem's answer, so the task's verifier can also judge
a whole plan written in one turn (`score`). The grid the model sees uses RAGEN's symbols: P the player, _ ice,
O a hole, G the goal. Moves are deterministic (gymnasium's is_slippery=False); a move off the grid leaves the player
where it was.
"""

from __future__ import annotations

import random
import re
from collections import deque

from rlvr.envs.base import ENVIRONMENTS, Environment, EnvStep, Outcome
from rlvr.tasks.base import TASKS, Problem, Task

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
MOVE = re.compile(r"\b(up|down|left|right)\b", re.IGNORECASE)
SHOWN = {"S": "_", "F": "_", "H": "O", "G": "G"}
RULES = ("You are on a frozen lake, at P. Walk to the goal G without stepping into a hole O; _ is safe ice. Each "
         "turn, reply with one move: Up, Down, Left or Right.")
INVALID = "Invalid move. Reply with one move: Up, Down, Left or Right."
EDGE = "You cannot move off the lake."


def parse_lake(lake: str) -> list[str]:
    """The rows of a lake string; a clear error for anything but a rectangle of S, F, H, G with one S and one G."""
    rows = lake.split("/")
    if (len({len(r) for r in rows}) != 1 or not rows[0] or set("".join(rows)) - set("SFHG")
            or lake.count("S") != 1 or lake.count("G") != 1):
        raise ValueError(f"not a FrozenLake map (rows of S, F, H, G joined by '/', one S and one G): {lake!r}")
    return rows


def find(rows: list[str], cell: str) -> tuple[int, int]:
    return next((r, c) for r, row in enumerate(rows) for c, x in enumerate(row) if x == cell)


def step_from(rows: list[str], at: tuple[int, int], move: str) -> tuple[int, int]:
    """Where a move leads (the same cell when it would leave the grid)."""
    r, c = at[0] + MOVES[move][0], at[1] + MOVES[move][1]
    return (r, c) if 0 <= r < len(rows) and 0 <= c < len(rows[0]) else at


def distances_to_goal(rows: list[str]) -> dict[tuple[int, int], int]:
    """Moves from each cell to the goal over ice (breadth-first from the goal; holes and unreachable cells absent)."""
    goal = find(rows, "G")
    dist, queue = {goal: 0}, deque([goal])
    while queue:
        at = queue.popleft()
        for move in MOVES:
            nxt = step_from(rows, at, move)
            if nxt not in dist and rows[nxt[0]][nxt[1]] != "H":
                dist[nxt] = dist[at] + 1
                queue.append(nxt)
    return dist


def render(rows: list[str], at: tuple[int, int]) -> str:
    """The grid as the model sees it: one line per row, cells separated by spaces, P where the player stands."""
    return "\n".join(" ".join("P" if (r, c) == at else SHOWN[x] for c, x in enumerate(row))
                     for r, row in enumerate(rows))


def random_lake(rng: random.Random, size: int, hole_fraction: float, min_distance: int) -> str:
    """A size x size lake with S and G at least `min_distance` moves apart over ice and about `hole_fraction` of the
    other cells holes (drawn again until the goal is reachable at that distance)."""
    cells = [(r, c) for r in range(size) for c in range(size)]
    while True:
        start, goal = rng.sample(cells, 2)
        grid = [["H" if rng.random() < hole_fraction else "F" for _ in range(size)] for _ in range(size)]
        grid[start[0]][start[1]], grid[goal[0]][goal[1]] = "S", "G"
        rows = ["".join(row) for row in grid]
        if distances_to_goal(rows).get(start, -1) >= min_distance:
            return "/".join(rows)


def moves_in(text: str) -> list[str]:
    return [m.lower() for m in MOVE.findall(text)]


def score(prompt: str, completion: str, answer: str, **_: object) -> float:
    """1.0 when the moves the completion names, in order, walk from S to G on the lake `answer` without falling
    into a hole (a whole plan in one turn), else 0.0."""
    rows = parse_lake(answer)
    at = find(rows, "S")
    for move in moves_in(completion):
        at = step_from(rows, at, move)
        if rows[at[0]][at[1]] == "H":
            return 0.0
        if rows[at[0]][at[1]] == "G":
            return 1.0
    return 0.0


@TASKS.register("frozen_lake")
class FrozenLakeTask(Task):
    """Random FrozenLake maps (size x size, about `hole_fraction` holes, the goal at least `min_distance` moves from
    the start), played in the `frozen_lake` environment. Held-out maps depend on `eval_seed` only."""

    name = "frozen_lake"
    verifier = "rlvr.envs.frozen_lake:score"
    environment = "frozen_lake"

    def __init__(self, seed: int = 0, size: int = 4, hole_fraction: float = 0.2, min_distance: int = 2,
                 eval_size: int = 100, eval_seed: int = 0):
        if size < 2 or not 0 <= hole_fraction < 1 or not 1 <= min_distance <= 2 * (size - 1):
            raise TypeError(f"size must be >= 2, hole_fraction in [0, 1) and min_distance in [1, {2 * (size - 1)}], "
                            f"got {size}, {hole_fraction} and {min_distance}")
        self.seed, self.size_, self.hole_fraction, self.min_distance = seed, size, hole_fraction, min_distance
        self.eval_size, self.eval_seed = eval_size, eval_seed
        self._eval = [self._lake(f"eval-{eval_seed}-{i}") for i in range(eval_size)]
        self._eval_set = set(self._eval)

    def _lake(self, key: str) -> str:
        return random_lake(random.Random(key), self.size_, self.hole_fraction, self.min_distance)

    def size(self, split: str) -> int | None:
        return self.eval_size if split == "eval" else None

    def problem(self, split: str, index: int) -> Problem:
        if split == "eval":
            lake = self._eval[index]
        else:
            lake, retry = self._lake(f"{self.seed}-train-{index}"), 0
            while lake in self._eval_set:  # a held-out map is never trained on
                retry += 1
                lake = self._lake(f"{self.seed}-train-{index}-{retry}")
        rows = parse_lake(lake)
        return Problem(uid=f"{split}-{index}", prompt=f"{RULES}\n\n{render(rows, find(rows, 'S'))}", answer=lake)

    def final_answer(self, completion: str) -> str | None:
        moves = moves_in(completion)
        return " ".join(moves) if moves else None


@ENVIRONMENTS.register("frozen_lake")
class FrozenLakeEnvironment(Environment):
    """One move per turn (the first of Up/Down/Left/Right the turn names); the reply is the grid after it (with a
    note when the move would leave the lake), or "Invalid move..." when the turn names none. The episode ends at
    the goal (success, reward 1) or in a hole (reward 0); use env.reward=discounted to prefer shorter walks."""

    corpus_hint = (RULES, INVALID, EDGE, "P _ O G")

    def __init__(self, problem: Problem, task: Task):
        super().__init__(problem, task)
        self.rows = parse_lake(str(problem.answer))
        self.at = find(self.rows, "S")
        self.distance = distances_to_goal(self.rows)
        self.moves = self.invalid = self.closer = 0
        self.fell = self.reached = False

    def step(self, text: str) -> EnvStep:
        found = moves_in(text)
        if not found:
            self.invalid += 1
            return EnvStep([{"role": "user", "content": INVALID}])
        before, self.at = self.at, step_from(self.rows, self.at, found[0])
        self.moves += 1
        cell = self.rows[self.at[0]][self.at[1]]
        self.fell, self.reached = cell == "H", cell == "G"
        if self.fell or self.reached:
            self.closer += self.reached
            return EnvStep(done=True)
        self.closer += self.distance.get(self.at, 10**6) < self.distance.get(before, 10**6)
        grid = render(self.rows, self.at)
        return EnvStep([{"role": "user", "content": f"{EDGE}\n{grid}" if self.at == before else grid}])

    def state_key(self, history: list) -> tuple[int, int]:
        """GiGPO's anchor state: where the player stands (the map is the group's)."""
        return self.at

    def outcome(self) -> Outcome:
        return Outcome(float(self.reached), self.reached)

    def metrics(self) -> dict[str, float]:
        """moves made, invalid turns, fell into a hole; `closer`: the share of moves that brought the player closer
        to the goal over ice (the feedback used: a walk that reads the grid moves closer; NaN without a move);
        `moves_to_success` (NaN unless the goal was reached)."""
        nan = float("nan")
        return {"moves": self.moves, "invalid_moves": self.invalid, "fell": float(self.fell),
                "closer": self.closer / self.moves if self.moves else nan,
                "moves_to_success": float(self.moves) if self.reached else nan,
                "shortest": float(self.distance.get(find(self.rows, "S"), nan))}
