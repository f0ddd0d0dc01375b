"""recipes/data/chat_addition_words.jsonl: the questions of chat_addition.jsonl with the reference answer written in
words ("one hundred forty-three"), a key the rule checkers score only in part against a reply in digits (rlvr's
math verifier reads some number words below a hundred, none with "hundred"), so that a judge has to score it
(docs/results.md, the judge on a key in words).

    python recipes/data/make_addition_words.py
"""

import json
from pathlib import Path

HERE = Path(__file__).parent
ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen").split()
TENS = "- - twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> str:
    """0 <= n < 1000 in English words: 143 -> 'one hundred forty-three'."""
    if n >= 100:
        rest = n % 100
        return f"{ONES[n // 100]} hundred" + (f" {number_words(rest)}" if rest else "")
    if n >= 20:
        return TENS[n // 10] + (f"-{ONES[n % 10]}" if n % 10 else "")
    return ONES[n]


if __name__ == "__main__":
    rows = [json.loads(line) for line in (HERE / "chat_addition.jsonl").read_text().splitlines()]
    with open(HERE / "chat_addition_words.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps({**row, "answer": number_words(int(row["answer"]))}) + "\n")
