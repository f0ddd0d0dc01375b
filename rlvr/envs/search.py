"""Search agents (Search-R1, Jin et al. 2025): the policy searches a corpus of passages, reads what comes back and
answers; the task's verifier judges the answer (exact match or F1, rlvr.verifiers.qa).

Two protocols (`call_format`):
- `tags`, Search-R1's: the model writes `<search>query</search>` and stops; the top passages come back as
  `<information>Doc 1 (Title: ...) ...</information>` (a user message); `<answer>...</answer>` ends the episode, and
  so does a turn with neither tag (the whole turn is then the answer). A `<search>` left unclosed is answered with
  an error message and the episode goes on.
- `json`, the library's tool-call format (rlvr.envs.tools): `<tool_call>{"name": "search", "arguments": {"query":
  ...}}</tool_call>`, answered with a tool message; the first turn without a call is the answer.

The passages are environment tokens: in the sequence, never in the loss. The retriever is the BM25 index of
rlvr.envs.retrieval, opened once per process. A query over `max_query_chars` is cut (counted); a retriever that
raises answers with an error message (counted) and the episode goes on.
"""

from __future__ import annotations

import math
import re

from rlvr.envs.base import ENVIRONMENTS, Environment, EnvStep, Outcome, verify
from rlvr.envs.retrieval import DEFAULT_B, DEFAULT_K1, BM25Index, Hit, open_index
from rlvr.envs.tools import CallFormat, Tool, ToolCall, check_call_format, parse_tool_calls, run_tool_call
from rlvr.errors import ConfigError
from rlvr.tasks.base import Problem, Task

SEARCH_TAG = re.compile(r"<search>(.*?)</search>", re.DOTALL)
ANSWER_TAG = re.compile(r"<answer>.*?</answer>", re.DOTALL)
NO_HITS = "No passage matches the query."


def passages_text(hits: list[Hit], max_chars: int) -> str:
    """Search-R1's rendering of the top passages: 'Doc i (Title: ...) text', each cut to `max_chars`."""
    if not hits:
        return NO_HITS
    lines = []
    for i, hit in enumerate(hits, 1):
        text = " ".join(hit.passage.text.split())
        if len(text) > max_chars:
            text = text[:max_chars].rstrip() + " ..."
        lines.append(f"Doc {i} (Title: {hit.passage.title}) {text}")
    return "\n".join(lines)


class Searcher:
    """One episode's search tool: the index, how many passages it returns and how long they and a query may be."""

    def __init__(self, index: BM25Index, k: int, max_passage_chars: int, max_query_chars: int):
        self.index, self.k = index, k
        self.max_passage_chars, self.max_query_chars = max_passage_chars, max_query_chars
        self.queries: list[str] = []
        self.cut = 0

    def search(self, query: str) -> str:
        """Search the corpus of passages; returns the best matching passages.

        Args:
            query: What to look for, e.g. a name and the fact wanted.
        """
        query = " ".join(str(query).split())
        if len(query) > self.max_query_chars:
            query, self.cut = query[: self.max_query_chars], self.cut + 1
        if not query:
            raise ValueError("empty query: write what to look for")
        self.queries.append(query)
        return passages_text(self.index.search(query, self.k), self.max_passage_chars)


@ENVIRONMENTS.register("search")
class SearchEnvironment(Environment):
    """Search a corpus, then answer (args: corpus, the passages' JSONL / Parquet file; call_format 'tags' (Search-R1)
    or 'json'; k passages per search; max_passage_chars, max_query_chars; index_dir, default $RLVR_CACHE_DIR/bm25;
    k1, b of BM25; format_reward, 0 by default, added for an episode that searched and whose every search was well
    formed and answered without an error (ToolRL's call-format reward, Qian et al. 2025, applied to searches);
    timeout_s per search)."""

    corpus_hint = ("<search>query</search>", "<information>Doc 1 (Title: Name) text</information>",
                   "<answer>answer</answer>")

    def __init__(self, problem: Problem, task: Task, corpus: str = "", call_format: CallFormat = "tags", k: int = 3,
                 max_passage_chars: int = 300, max_query_chars: int = 200, index_dir: str | None = None,
                 k1: float = DEFAULT_K1, b: float = DEFAULT_B, format_reward: float = 0.0, timeout_s: float = 10.0):
        super().__init__(problem, task)
        if not corpus:
            raise ConfigError("The search environment needs data.tasks[].env.args.corpus: a .jsonl or .parquet file "
                              "of passages with id, title, text.")
        check_call_format(call_format, "data.tasks[].env.args.call_format")
        if k < 1 or max_passage_chars < 1 or max_query_chars < 1:
            raise ConfigError("data.tasks[].env.args: k, max_passage_chars and max_query_chars must be at least 1.")
        self.searcher = Searcher(open_index(corpus, index_dir, k1, b), k, max_passage_chars, max_query_chars)
        self.tool = Tool(self.searcher.search, timeout_s, name="search")
        self.call_format, self.format_reward = call_format, format_reward
        self.tools = [self.tool] if call_format == "json" else []  # schemas for chat templates that take tools
        self.answer: str | None = None
        self.searches = self.errors = self.malformed = 0

    def _calls(self, text: str) -> list[ToolCall] | None:
        """The turn's searches; None when the turn is the answer."""
        if self.call_format == "json":
            return parse_tool_calls(text, {"search": self.tool}, "json") or None
        if ANSWER_TAG.search(text):
            return None
        calls = [ToolCall("search", {"query": q}) for q in SEARCH_TAG.findall(text)]
        if text.count("<search>") > len(calls):  # an opening tag without its closing one
            calls.append(ToolCall("", {}, "a search is written <search>query</search>; the closing tag is missing"))
        return calls or None

    def step(self, text: str) -> EnvStep:
        calls = self._calls(text)
        if calls is None:
            self.answer = text
            return EnvStep(done=True)
        messages = []
        for call in calls:
            result = run_tool_call(call, {"search": self.tool})
            failed = result.startswith("Error:")
            self.searches += not call.error
            self.malformed += bool(call.error)
            self.errors += failed and not call.error
            if self.call_format == "json":
                messages.append({"role": "tool", "name": "search", "content": result})
            else:
                messages.append({"role": "user", "content": f"<information>{result}</information>"})
        return EnvStep(messages)

    def outcome(self) -> Outcome:
        score = 0.0 if self.answer is None else verify(self.task, self.problem, self.answer)
        well_formed = self.searches > 0 and self.errors == 0 and self.malformed == 0
        bonus = self.format_reward if well_formed else 0.0
        return Outcome(score + bonus, score >= 1.0)

    def metrics(self) -> dict[str, float]:
        queries = self.searcher.queries
        entity = self.problem.fields.get("entity")
        names = (float(any(str(entity).lower() in q.lower() for q in queries))
                 if entity and queries else math.nan)  # NaN: not applicable (no search, or no entity known)
        return {"searches": float(self.searches), "searched": float(self.searches > 0),
                "search_errors": float(self.errors), "malformed_searches": float(self.malformed),
                "queries_cut": float(self.searcher.cut), "answered": float(self.answer is not None),
                "query_names_entity": names}
