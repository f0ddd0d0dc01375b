"""Adapter for reasoning-gym's procedural tasks (any registered dataset by name), scored by its own
scorer with the base class's substring partial credit turned off (it pays answers that merely contain
the right one)."""

from __future__ import annotations

import functools
import re
from typing import Any

from rlvr.errors import ConfigError, RlvrError, did_you_mean
from rlvr.tasks.base import TASKS, Problem, Task
from rlvr.verifiers import guards, rules
from rlvr.verifiers.extraction import reply_text
from rlvr.verifiers.verdict import Verdict, shown_answer

INSTRUCTION = "Give your final answer inside <answer></answer> tags."


def _require():
    try:
        import reasoning_gym
    except ImportError:
        raise RlvrError("The reasoning_gym task needs the 'gym' extra: pip install 'rlvr[gym]'.") from None
    return reasoning_gym


@functools.cache
def _scorer(name: str):
    """The dataset's own score_answer, or exact match where it would only inherit substring credit."""
    rg = _require()
    from reasoning_gym.dataset import ProceduralDataset
    from reasoning_gym.factory import DATASETS

    cls, _ = DATASETS[name]
    if cls.score_answer is ProceduralDataset.score_answer:
        return lambda answer, entry: float(isinstance(answer, str) and answer.strip() == str(entry["answer"]).strip())
    return rg.get_score_answer_fn(name)


def tagged_answers(completion: str, tag: str | None) -> list[str]:
    """The final answers of a completion by the final-answer rule (rlvr.verifiers.extraction: the reply up to the
    end of its turn, `<think>` blocks aside): the text inside every complete <tag>...</tag>, in order; for the
    default tag `answer` without one, the explicit final answer of another format (a final-answer line, a box); the
    whole reply when tag is None."""
    reply = reply_text(completion)[0]
    if tag is None:
        return [reply.strip()]
    found = [f.strip() for f in re.findall(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", reply, flags=re.DOTALL)]
    if found:  # and any other final answer after the last tag ("Actually, 150.")
        return found + guards.later_alternatives(reply[reply.rfind(f"</{tag}>") + len(tag) + 3 :], found[-1])
    if tag != "answer" or re.search(r"<answer>", reply, re.IGNORECASE):
        return found
    return rules.written_final_answers(reply).values


def finished_answer(completion: str, tag: str | None) -> bool:
    """Whether the answer was finished before any token limit: a closed tag, or an explicit final answer of
    another format that something follows; free text (tag None) only when its turn ended."""
    reply, turn_ended = reply_text(completion)
    if tag is None:
        return turn_ended
    return bool(re.search(rf"</{re.escape(tag)}>", reply)) or (
        tag == "answer" and rules.written_final_answers(reply).finished)


def extract_tagged(completion: str, tag: str | None) -> str | None:
    """The text inside the last <tag>...</tag>, or the whole completion when tag is None."""
    found = tagged_answers(completion, tag)
    return found[-1] if found else None


def offered_answers(prompt: Any, completion: str, reference: str, tag: str | None) -> list[str]:
    """The answers a completion offers, after the guards of rlvr.verifiers.guards (docs/verifiers.md, "Reward
    hacking"): sentences copied from the prompt are not the completion's (an echoed instruction holds empty
    tags); every different tagged answer is offered (several tags are a hedge); free text (no tag) offers the
    values it lists side by side in its final statement, else itself. [] when it offers none: no tag, an empty
    one, or an answer that merely restates an expression of the prompt."""
    text = guards.without_prompt_copies(completion, prompt, reference)
    answers = list(dict.fromkeys(tagged_answers(text, tag)))
    if tag is None and answers:
        answers = guards.hedged_values(rules.final_statement(answers[0])) or answers
    if not answers or any(not a or guards.restates_prompt(a, prompt, reference) for a in answers):
        return []
    return answers


def score(prompt: str, completion: str, answer: str, rg_dataset: str, rg_entry: dict, answer_tag: str | None = "answer",
          truncated: bool = False, **_: Any) -> Verdict:
    """reasoning-gym's scorer on the tagged answer; 0.0 when no answer is given. Several different tagged answers
    score the lowest of their scores (a hedge is right only if every answer is); an answer cut off by the token
    limit has not finished and scores 0 (a closed tag is a finished answer; free text only when its turn ended)."""
    offered = offered_answers(prompt, completion, answer, answer_tag)
    if not offered or (truncated and not finished_answer(completion, answer_tag)):
        return Verdict(0.0, shown_answer(offered[-1]) if offered else None)
    scorer = _scorer(rg_dataset)
    return Verdict(min(float(scorer(a, rg_entry)) for a in offered), shown_answer(" or ".join(offered)))


@TASKS.register("reasoning_gym")
class ReasoningGymTask(Task):
    """Any reasoning-gym dataset by name (args: dataset, config, eval_size, answer_tag)."""

    name = "reasoning_gym"
    verifier = "rlvr.tasks.reasoning_gym:score"

    def __init__(self, seed: int = 0, dataset: str = "basic_arithmetic", config: dict | None = None,
                 eval_size: int = 200, answer_tag: str | None = "answer", train_size: int = 1_000_000):
        rg = _require()
        from reasoning_gym.factory import DATASETS

        if dataset not in DATASETS:
            raise ConfigError(
                f"Unknown reasoning-gym dataset '{dataset}'.{did_you_mean(dataset, DATASETS)} "
                f"See reasoning_gym.factory.DATASETS for the {len(DATASETS)} names."
            )
        self.dataset, self.answer_tag, self.eval_size = dataset, answer_tag, eval_size
        try:
            self._splits = {
                "train": rg.create_dataset(dataset, seed=seed, size=train_size, **(config or {})),
                "eval": rg.create_dataset(dataset, seed=seed + 1_000_003, size=eval_size, **(config or {})),
            }
        except (TypeError, ValueError, AssertionError) as e:
            raise ConfigError(f"Bad reasoning-gym config for '{dataset}' (data.tasks[].args.config): {e}") from None

    @property
    def default_label(self) -> str:
        return self.dataset

    def size(self, split: str) -> int | None:
        return self.eval_size if split == "eval" else None

    def final_answer(self, completion: str) -> str | None:
        found = extract_tagged(completion, self.answer_tag)
        return " ".join(found.split()) if found else None

    def problem(self, split: str, index: int) -> Problem:
        data = self._splits[split]
        entry = data[index % len(data)]
        prompt = entry["question"] + ("\n" + INSTRUCTION if self.answer_tag == "answer" else "")
        return Problem(
            uid=f"{self.dataset}-{split}-{index}",
            prompt=prompt,
            answer=str(entry["answer"]),
            solution=f"<answer>{entry['answer']}</answer>" if self.answer_tag == "answer" else str(entry["answer"]),
            fields={"rg_dataset": self.dataset, "rg_entry": entry, "answer_tag": self.answer_tag},
        )
