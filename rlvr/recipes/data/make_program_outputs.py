"""Writes program_outputs.jsonl: held-out program-output questions (deduction: what does f(input) return?) for the
absolute_zero task's evaluation, written apart from any proposer: 19 small program families, 6 instances each with
constants and inputs drawn from a fixed seed, each output the repr of what running the program returns (the
programs are ours, so they run here in-process; benchmarks/self_play.py checks every answer again in the sandbox).

    python rlvr/recipes/data/make_program_outputs.py
"""

import json
import random
from pathlib import Path

from rlvr.tasks.absolute_zero import SEED_PROGRAM, program_identity

WORDS = ["apple", "river", "stone", "cloud", "tiger", "lemon", "piano", "mango", "ocean", "pixel", "Hello", "World"]


def families(rng: random.Random):
    k, m = rng.randint(2, 9), rng.randint(2, 5)
    word, other = rng.sample(WORDS, 2)
    xs = [rng.randint(0, 20) for _ in range(rng.randint(3, 5))]
    n = rng.randint(2, 30)
    return [
        # drawn, then left out by main() (the seed program), so the other families keep their draws
        ("identity", "def f(a):\n    return a", repr(rng.choice([word, n, xs]))),
        ("add", f"def f(x):\n    return x + {k}", repr(n)),
        ("multiply", f"def f(x):\n    return x * {m}", repr(n)),
        ("concat", f"def f(s):\n    return s + {other!r}", repr(word)),
        ("upper", "def f(s):\n    return s.upper()", repr(word)),
        ("length", "def f(s):\n    return len(s)", repr(word)),
        ("reverse", "def f(s):\n    return s[::-1]", repr(word)),
        ("index", f"def f(xs):\n    return xs[{rng.randint(0, len(xs) - 1)}]", repr(xs)),
        ("maximum", "def f(xs):\n    return max(xs)", repr(xs)),
        ("total", "def f(xs):\n    return sum(xs)", repr(xs)),
        ("branch", f"def f(x):\n    if x > {k * 2}:\n        return 'big'\n    return 'small'", repr(n)),
        ("loop", "def f(n):\n    total = 0\n    for i in range(n):\n        total += i\n    return total",
         repr(rng.randint(2, 8))),
        ("two_args", "def f(a, b):\n    return a * b + 1", f"{k}, {m}"),
        ("double_all", "def f(xs):\n    return [x * 2 for x in xs]", repr(xs)),
        ("repeat", f"def f(s):\n    return s * {m}", repr(word[:3])),
        ("count", f"def f(s):\n    return s.count({word[0]!r})", repr(word + other + word)),
        ("sort", "def f(xs):\n    return sorted(xs)", repr(xs)),
        ("first", "def f(s):\n    return s[0]", repr(word)),
        ("modulo", f"def f(x):\n    return x % {m}", repr(n)),
        ("lookup", f"def f(key):\n    table = {{'a': {k}, 'b': {m}, 'c': {n}}}\n    return table[key]",
         repr(rng.choice("abc"))),
    ]


def main() -> None:
    rng = random.Random(42)
    rows = []
    for i in range(6):
        for name, program, arguments in families(rng):
            scope: dict = {}
            exec(program, scope)  # our own programs
            output = repr(eval(f"f({arguments})", scope))
            if program_identity(program) == program_identity(SEED_PROGRAM):
                continue  # the solver trains on the seed program: a held-out question never asks about it
            rows.append({"id": f"{name}-{i}", "program": program, "input": arguments, "output": output})
    path = Path(__file__).with_name("program_outputs.jsonl")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {len(rows)} questions to {path}")


if __name__ == "__main__":
    main()
