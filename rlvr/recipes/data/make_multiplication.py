"""recipes/data/chat_multiplication.jsonl: 1,100 3-digit multiplications asked as chat questions ("What is 361 *
220?"), both operands in 100..999, the last 100 held out by the recipe (eval_size). SmolLM2-135M-Instruct answers
none of them right in its head; recipes/smollm2_tool_use.yaml offers it a calculator (docs/results.md).

    python recipes/data/make_multiplication.py
"""

import json
import random
from pathlib import Path

HERE = Path(__file__).parent
ROWS = 1100

if __name__ == "__main__":
    rng = random.Random(44)
    seen: set[tuple[int, int]] = set()
    with open(HERE / "chat_multiplication.jsonl", "w") as f:
        while len(seen) < ROWS:
            a, b = rng.randint(100, 999), rng.randint(100, 999)
            if (a, b) in seen:
                continue
            seen.add((a, b))
            f.write(json.dumps({"prompt": f"What is {a} * {b}?", "answer": str(a * b)}) + "\n")
