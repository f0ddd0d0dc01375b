"""Tree rollouts: a group's n samples decoded as a tree of segments that share their prefixes (TreePO, Li et al.
2025, "TreePO: Bridging the Gap of Policy Optimization and Efficacy and Inference Efficiency with Heuristic
Tree-based Modeling", arXiv 2508.17445).

`roots` samples start from the prompt; every `segment_tokens` decoded tokens all live rows reach a boundary, where,
while the group holds fewer than n rows, the `fork_fraction` most uncertain of them (the highest mean entropy over
their last segment, at least one) fork into `branch_factor` rows each: the children copy the parent's tokens and
cache and decode on from there with their own random streams. A row ends at EOS or at max_new_tokens and is a leaf.
Rows that end early free their share of the budget for forks of the others; if every row ended with fewer than n
leaves, the rest are decoded from the prompt as independent samples, so a group always holds exactly n completions.

Each leaf carries its path (`Completion.tree_path`: its root, then its child index at each boundary), which the
`tree` advantage estimator reads, and `decoded_tokens`: the tokens it decoded itself, not inherited from a parent,
so their sum is what the engine decoded for the group.

`TreeRollout` is a rollout engine over another one, built at set-up when rollout.tree is set; the engine under it
knows nothing of trees. It needs the engine's cache sessions (`session()`, the static engine's): the continuations
of a tree run in one session, so a forked row reuses its parent's keys and values (no prefill of the shared
prefix)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import torch

from rlvr.config import TreeConfig
from rlvr.errors import ConfigError
from rlvr.rollout.base import Completion, RolloutEngine, SamplingParams


class TreeRollout:
    """`generate` decodes each prompt's `params.n` samples as a tree (rollout.tree) over `engine`, continuing rows in
    the engine's cache sessions. Calls inside this engine's own `session()` (the turns of multi-turn episodes, which
    continue earlier calls' rows) go to the engine unchanged: a tree needs a session of its own, so tree rollouts
    are for single completions and an episode samples independently."""

    def __init__(self, engine: RolloutEngine, tree: TreeConfig, engine_name: str):
        if not callable(getattr(engine, "session", None)):
            raise ConfigError(f"rollout.tree decodes a group as a tree in the engine's cache sessions, but "
                              f"rollout.engine={engine_name} generates with {type(engine).__name__} here, which has "
                              f"none (auto picks the static engine only on CUDA). Set rollout.engine=static (Llama, "
                              f"Qwen2, Qwen3, Mistral), or drop rollout.tree.")
        self.engine, self.tree = engine, tree
        self.batch_size = getattr(engine, "batch_size", None)  # groups per engine batch (EpisodeRunner)
        self.in_session = False

    def generate(self, prompts: list[list[int]], params: SamplingParams,
                 generators: list[torch.Generator] | None = None) -> list[list[Completion]]:
        if self.in_session:
            return self.engine.generate(prompts, params, generators)
        return grow_trees(self.engine, prompts, params, self.tree, generators)

    @contextmanager
    def session(self) -> Iterator[None]:
        """The engine's session, whose calls continue the rows of earlier ones (samples, not trees)."""
        with self.engine.session():
            self.in_session = True
            try:
                yield
            finally:
                self.in_session = False


@dataclass
class _Row:
    """A path of a group's tree being decoded."""

    group: int
    path: tuple[int, ...]
    generator: torch.Generator | None
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    entropies: list[float] = field(default_factory=list)
    decoded: int = 0  # tokens this row decoded itself
    finished: bool = False  # EOS or max_new_tokens
    truncated: bool = False
    uncertainty: float = 0.0  # mean entropy over its last segment

    def extend(self, c: Completion) -> None:
        self.tokens += c.token_ids
        self.logprobs += c.logprobs
        self.entropies += c.entropies
        self.decoded += len(c.token_ids)
        self.uncertainty = sum(c.entropies) / len(c.entropies) if c.entropies else 0.0

    def fork(self, child: int, generator: torch.Generator | None) -> _Row:
        return _Row(self.group, self.path + (child,), generator, list(self.tokens), list(self.logprobs),
                    list(self.entropies))


def _spawn(generator: torch.Generator | None, count: int) -> list[torch.Generator | None]:
    """`count` generators seeded from `generator` (None: the global stream for all)."""
    if generator is None:
        return [None] * count
    seeds = torch.randint(2**62, (count,), generator=generator, device=generator.device).tolist()
    return [torch.Generator(generator.device).manual_seed(s) for s in seeds]


def grow_trees(engine, prompts: list[list[int]], params: SamplingParams, tree: TreeConfig,
               generators: list[torch.Generator] | None = None) -> list[list[Completion]]:
    """`params.n` completions per prompt decoded as trees (segment_tokens, branch_factor, roots, fork_fraction) with
    `engine.generate` segment by segment, inside one `engine.session()`."""
    n = params.n
    if n == 1:
        return engine.generate(prompts, params, generators)
    roots = min(tree.roots, n)
    rows: list[_Row] = []
    with engine.session():
        first = engine.generate(prompts, replace(params, n=roots, max_new_tokens=min(tree.segment_tokens,
                                                                                     params.max_new_tokens),
                                                 return_entropy=True), generators)
        for g, group in enumerate(first):
            streams = _spawn(generators[g] if generators is not None else None, roots)
            for j, c in enumerate(group):
                rows.append(_Row(g, (j,), streams[j]))
                _advance(rows[-1], c, params)
        while live := [r for r in rows if not r.finished]:
            rows += _forks(rows, live, n, tree)
            live = [r for r in rows if not r.finished]
            done = len(live[0].tokens)
            segment = replace(params, n=1, max_new_tokens=min(tree.segment_tokens, params.max_new_tokens - done),
                              min_new_tokens=max(0, params.min_new_tokens - done), return_entropy=True)
            out = engine.generate([prompts[r.group] + r.tokens for r in live], segment,
                                  [r.generator for r in live] if generators is not None else None)
            for r, (c,) in zip(live, out):
                _advance(r, c, params)
    leaves = [[r for r in rows if r.group == g] for g in range(len(prompts))]
    missing = [(g, n - len(group)) for g, group in enumerate(leaves) if len(group) < n]
    filled = _independent(engine, prompts, params, generators, missing, roots)
    out = []
    for g, group in enumerate(leaves):
        completions = [_completion(engine.tokenizer, r, params.return_entropy) for r in group]
        out.append(completions + filled.get(g, []))
    return out


def _advance(row: _Row, c: Completion, params: SamplingParams) -> None:
    """Append a segment; the row is a leaf once it ends (EOS) or reaches max_new_tokens."""
    row.extend(c)
    ended = not c.truncated
    row.finished = ended or len(row.tokens) >= params.max_new_tokens
    row.truncated = row.finished and not ended


def _forks(rows: list[_Row], live: list[_Row], n: int, tree: TreeConfig) -> list[_Row]:
    """At a boundary: the new rows forked from the most uncertain live ones, within the group's budget of n."""
    new = []
    for g in dict.fromkeys(r.group for r in live):
        mine = [r for r in live if r.group == g]
        budget = n - sum(r.group == g for r in rows)
        forking = sorted(mine, key=lambda r: -r.uncertainty)[: max(1, math.ceil(tree.fork_fraction * len(mine)))]
        for r in mine:
            children = 0
            if r in forking and budget > 0:
                children = min(tree.branch_factor - 1, budget)
                budget -= children
            streams = _spawn(r.generator, children + 1) if children else [r.generator]
            r.generator = streams[0]
            new += [r.fork(k, streams[k]) for k in range(1, children + 1)]
            r.path = r.path + (0,)
    return new


def _independent(engine, prompts: list[list[int]], params: SamplingParams,
                 generators: list[torch.Generator] | None, missing: list[tuple[int, int]],
                 roots: int) -> dict[int, list[Completion]]:
    """Completions decoded from the prompt for groups whose tree ended with fewer than n leaves; each its own root."""
    out: dict[int, list[Completion]] = {}
    for g, count in missing:
        gens = [_spawn(generators[g], 1)[0]] if generators is not None else None
        (group,) = engine.generate([prompts[g]], replace(params, n=count), gens)
        out[g] = [replace(c, tree_path=(roots + k,), decoded_tokens=len(c.token_ids)) for k, c in enumerate(group)]
    return out


def _completion(tokenizer, row: _Row, with_entropy: bool) -> Completion:
    return Completion(token_ids=row.tokens, text=tokenizer.decode(row.tokens, skip_special_tokens=True),
                      logprobs=row.logprobs, truncated=row.truncated,
                      entropies=row.entropies if with_entropy else [], tree_path=row.path,
                      decoded_tokens=row.decoded)
