"""recipes/data/search_corpus.jsonl, search_qa_train.jsonl, search_qa_heldout.jsonl: a corpus of fictional people,
towns and guilds (one passage each) and questions only the corpus answers, for search agents
(recipes/smollm2_search.yaml, docs/environments.md "Search agents").

Every name is made up from syllables, so no model knows an answer from memory. Two worlds are drawn from the seed,
each with its own people, towns, guilds, regions and rivers: the training questions ask about the first, the
held-out questions about the second, so held-out entities are disjoint from training ones by construction. Both
worlds' passages are in the one corpus. Questions are single-hop (one passage answers: "In which town was X born?")
or two-hop (the answer is in the passage of an entity named in the first: "In which region was X born?"); each row
has `question`, `golden_answers`, `entity` (the person, town or guild asked about), `hops` and HotpotQA-style
`supporting_facts` ([title, sentence] of the passages needed).

    python recipes/data/make_search_qa.py            # seed 55
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).parent
SEED = 55
ONSETS = ["b", "br", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "q", "r", "s", "st", "t", "th",
          "v", "w", "z"]
VOWELS = ["a", "e", "i", "o", "u", "ae", "ei", "ou"]
CODAS = ["", "", "n", "r", "l", "th", "sk", "m", "d", "x"]
PROFESSIONS = ["glassblower", "cartographer", "beekeeper", "clockmaker", "ferryman", "herbalist", "stonemason",
               "lamplighter", "weaver", "brewer", "astronomer", "bookbinder", "potter", "saddler", "cooper",
               "falconer", "locksmith", "shipwright", "chandler", "tanner"]
WORLDS = {"train": {"people": 240, "towns": 48, "guilds": 32, "regions": 8, "rivers": 12},
          "heldout": {"people": 60, "towns": 16, "guilds": 10, "regions": 4, "rivers": 6}}
HELDOUT_QUESTIONS, TRAIN_QUESTIONS = 120, 1000


class Names:
    """Made-up names, never the same twice."""

    def __init__(self, rng: random.Random):
        self.rng, self.used = rng, set()

    def word(self, syllables: int) -> str:
        while True:
            w = "".join(self.rng.choice(ONSETS) + self.rng.choice(VOWELS) + self.rng.choice(CODAS)
                        for _ in range(syllables)).capitalize()
            if w not in self.used and len(w) >= 4:
                self.used.add(w)
                return w


def make_world(rng: random.Random, names: Names, sizes: dict[str, int], world: str) -> tuple[list[dict], list[dict]]:
    """One world's passages and its questions (all of them; the caller picks)."""
    regions = [f"{names.word(2)} Vale" for _ in range(sizes["regions"])]
    rivers = [names.word(2) for _ in range(sizes["rivers"])]
    towns = [{"name": names.word(2) + rng.choice(["ford", "holm", "wick", "mere", "stead"]),
              "region": rng.choice(regions), "river": rng.choice(rivers), "founded": rng.randint(1100, 1700)}
             for _ in range(sizes["towns"])]
    guilds = [{"name": f"{names.word(2)} {rng.choice(['Guild', 'Company', 'Society', 'League'])}",
               "town": rng.choice(towns), "founded": rng.randint(1600, 1850)} for _ in range(sizes["guilds"])]
    people = [{"name": f"{names.word(2)} {names.word(2)}", "born": rng.randint(1790, 1890), "town": rng.choice(towns),
               "profession": rng.choice(PROFESSIONS), "guild": rng.choice(guilds)} for _ in range(sizes["people"])]
    passages = []
    for t in towns:
        passages.append({"title": t["name"], "text": f"{t['name']} is a town in {t['region']}, founded in "
                         f"{t['founded']} on the banks of the river {t['river']}."})
    for g in guilds:
        passages.append({"title": g["name"], "text": f"The {g['name']} was founded in {g['founded']}. Its hall "
                         f"stands in {g['town']['name']}."})
    for p in people:
        passages.append({"title": p["name"], "text": f"{p['name']} (born {p['born']}) was a {p['profession']} from "
                         f"{p['town']['name']}. {p['name'].split()[0]} belonged to the {p['guild']['name']}."})
    for i, passage in enumerate(passages):
        passage["id"] = f"{world}-{i}"

    def q(question: str, answer: object, entity: str, facts: list[str], *aliases: str) -> dict:
        return {"question": question, "golden_answers": [str(answer), *aliases], "entity": entity, "hops": len(facts),
                "supporting_facts": [[title, 0] for title in facts]}

    questions = []
    for p in people:
        n, town, guild = p["name"], p["town"], p["guild"]
        questions += [
            q(f"In which town was {n} born?", town["name"], n, [n]),
            q(f"What was the profession of {n}?", p["profession"], n, [n]),
            q(f"In what year was {n} born?", p["born"], n, [n]),
            q(f"Which guild did {n} belong to?", guild["name"], n, [n]),
            q(f"In which region was {n} born?", town["region"], n, [n, town["name"]]),
            q(f"On which river lies the town where {n} was born?", town["river"], n, [n, town["name"]],
              f"river {town['river']}"),
            q(f"In which town stands the hall of the guild {n} belonged to?", guild["town"]["name"], n,
              [n, guild["name"]]),
            q(f"In what year was the guild of {n} founded?", guild["founded"], n, [n, guild["name"]]),
        ]
    for t in towns:
        questions += [q(f"In which region is {t['name']}?", t["region"], t["name"], [t["name"]]),
                      q(f"In what year was {t['name']} founded?", t["founded"], t["name"], [t["name"]])]
    for g in guilds:
        questions.append(q(f"In which town stands the hall of the {g['name']}?", g["town"]["name"], g["name"],
                           [g["name"]]))
    rng.shuffle(questions)
    return passages, questions


def make_all(seed: int = SEED) -> dict[str, list[dict]]:
    """The corpus and the two question files, deterministic in `seed`."""
    rng = random.Random(seed)
    names = Names(rng)
    corpus, train = make_world(rng, names, WORLDS["train"], "train")
    heldout_passages, heldout = make_world(rng, names, WORLDS["heldout"], "heldout")
    corpus = corpus + heldout_passages
    random.Random(seed + 1).shuffle(corpus)
    return {"search_corpus": [{"id": p["id"], "title": p["title"], "text": p["text"]} for p in corpus],
            "search_qa_train": train[:TRAIN_QUESTIONS], "search_qa_heldout": heldout[:HELDOUT_QUESTIONS]}


def write(directory: Path, seed: int = SEED) -> None:
    for name, rows in make_all(seed).items():
        with open(directory / f"{name}.jsonl", "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
