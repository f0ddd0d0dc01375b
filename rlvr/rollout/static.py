"""The static-cache rollout engine: a decode loop written on plain PyTorch over the policy's own submodules.

The engine calls the model's embedding, each layer's norms, q/k/v/o projections (and Qwen3's q/k norms), MLP,
the final norm and the LM head where they are, so it reads the live weights in place: an optimizer step is seen
by the next generation with no copy, no sync and no recapture, and peft's LoRA layers apply their adapters when
called. The engine itself owns only attention and the KV cache:

- one KV buffer per layer, [rows, kv_heads, columns, head_dim], allocated once and grown when a later call needs
  more rows or columns; each prompt is prefilled once and its cache copied to its n samples;
- RoPE from the model's own rotary module (so its scaling variant, e.g. llama3, linear or yarn, is the model's),
  tabulated once per cache size; `scaled_dot_product_attention` with an explicit mask (prompt padding, causality
  and, where configured, the sliding window), GQA by folding the query heads of a key/value head together;
- one decode step (embed -> layers -> norm -> head); on CUDA it is captured as a CUDA graph per batch-size bucket
  (powers of two) with static input/output buffers, and finished rows are compacted into a smaller bucket.
  Sampling (temperature, top-k/top-p, min-new-tokens) runs on the device after the step, drawing tokens by the
  inverse CDF of each row's probabilities at one uniform number drawn from the group's generator, so a group's noise
  comes from its own generator, whatever else shares the batch.

The same code runs eagerly on a CPU. Llama, Qwen2, Qwen3 and Mistral decoders are covered; any other model (or a
sharded one) falls back to the `hf` engine with a one-line message.

Episodes (`session()`): between the turns of multi-turn episodes the cache of each sample row is kept; a later call
whose prompt extends a kept row's tokens prefills only the new tokens (the last sampled token and the
environment's reply) after that row's kept keys and values, instead of re-encoding the whole conversation.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F

from rlvr.errors import ConfigError
from rlvr.models.head import causal_lm
from rlvr.models.vision import is_vision_model
from rlvr.rollout.base import ENGINES, BatchedEngine, Completion, SamplingParams
from rlvr.rollout.hf import HFRolloutEngine, eos_ids
from rlvr.rollout.sampling import next_tokens, stop_reached
from rlvr.watchdog import WATCH

FAMILIES = ("llama", "qwen2", "qwen3", "mistral")
# RoPE variants whose frequencies depend on the sequence length seen so far (transformers' dynamic_rope_update):
# a table computed once would differ from the model's own forward.
LENGTH_DEPENDENT_ROPE = ("dynamic", "longrope")
COLUMN_MULTIPLE_CUDA = 64  # cache columns are rounded up on CUDA so varying prompt lengths reuse captured graphs
CDF_BLOCK = 1024  # vocabulary entries per block of inverse_cdf's first level


def inverse_cdf(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """Token i of each row with probability p_i / sum(p) (the weights need not sum to 1), from one uniform number per
    row: the first index whose cumulative weight exceeds u x total, so a token of weight 0 is never drawn. One random
    number per row instead of one per vocabulary entry: for 32 rows of a 49k vocabulary on a CPU this takes a few ms
    where drawing 1.5M exponentials took 41 ms, 15% of a decode step.

    In two levels, so the whole row is read once and never copied: the block of CDF_BLOCK entries from the running
    total of the blocks' sums, then the token inside it from that block's running total in float64; u's remainder
    inside the block picks the token, as one search over the whole row would (the float32 block sums move a
    boundary by about 1e-7 of the total)."""
    rows, vocab = probs.shape
    full = vocab - vocab % CDF_BLOCK
    sums = [probs[:, :full].reshape(rows, -1, CDF_BLOCK).sum(-1)] if full else []
    if full < vocab:
        sums.append(probs[:, full:].sum(-1, keepdim=True))
    block_sums = (torch.cat(sums, -1) if len(sums) > 1 else sums[0]).double()
    cdf = block_sums.cumsum(-1)
    target = uniform.double() * cdf[:, -1]
    block = torch.searchsorted(cdf, target[:, None], right=True).squeeze(-1).clamp_(max=cdf.shape[-1] - 1)
    picked = block_sums.gather(-1, block[:, None]).squeeze(-1)
    before = cdf.gather(-1, block[:, None]).squeeze(-1) - picked
    share = ((target - before) / picked).clamp_(0.0, 1.0 - 2.0 ** -30)
    columns = block[:, None] * CDF_BLOCK + torch.arange(CDF_BLOCK, device=probs.device)
    inside = probs.gather(-1, columns.clamp(max=vocab - 1)).double().masked_fill_(columns >= vocab, 0.0).cumsum(-1)
    # strictly below the block's total, so the search lands on a token of non-zero weight
    token = torch.searchsorted(inside, (share * inside[:, -1])[:, None], right=True).squeeze(-1)
    return columns.gather(-1, token.clamp_(max=CDF_BLOCK - 1)[:, None]).squeeze(-1).clamp_(max=vocab - 1)


def unsupported_reason(model: torch.nn.Module) -> str | None:
    """Why the static engine cannot run `model` (None when it can)."""
    lm = causal_lm(model)
    config = getattr(lm, "config", None)
    family = getattr(config, "model_type", None)
    if family not in FAMILIES:
        return f"does not cover model type '{family}' (covered: {', '.join(FAMILIES)})"
    from torch.distributed.fsdp import FSDPModule

    if any(isinstance(m, FSDPModule) for m in model.modules()):
        return "does not run on FSDP2-sharded parameters"
    rope = getattr(getattr(lm.model, "rotary_emb", None), "rope_type", "default")
    if rope in LENGTH_DEPENDENT_ROPE:
        return f"does not cover length-dependent RoPE scaling '{rope}'"
    return None


def bucket_size(count: int, capacity: int, static_shapes: bool) -> int:
    """Rows a step runs with for `count` live rows: the next power of two (at most `capacity`) when steps are
    captured graphs (few captures), exactly `count` when eager."""
    if not static_shapes:
        return count
    return min(capacity, 1 << max(0, count - 1).bit_length())


class KVCache:
    """Per-layer key and value buffers [rows, kv_heads, columns, head_dim], with each stored key's state: `valid`
    (a real token is there) and `position` (its RoPE position, for sliding windows)."""

    def __init__(self, layers: int, rows: int, columns: int, kv_heads: int, head_dim: int, dtype: torch.dtype,
                 device: torch.device):
        shape = (rows, kv_heads, columns, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.valid = torch.zeros((rows, columns), dtype=torch.bool, device=device)
        self.position = torch.zeros((rows, columns), dtype=torch.long, device=device)
        self.rows, self.columns = rows, columns

    def keep_rows(self, index: torch.Tensor) -> None:
        """Move rows `index` to the front (compaction): row j becomes old row index[j]."""
        m = len(index)
        for buffers in (self.k, self.v):
            for buf in buffers:
                buf[:m] = buf.index_select(0, index)
        self.valid[:m] = self.valid.index_select(0, index)
        self.position[:m] = self.position.index_select(0, index)


class LiveCount:
    """How many rows are still generating, read one step late: each step copies its count to pinned host memory
    without waiting, and the host decides on the previous step's count, which the GPU finished while this step was
    queued, so the host never waits for the step in flight and launches the next one while it runs. Rows only ever
    finish, so a count one step old bounds the live rows from above: a compaction keeps every live row, and the
    loop ends one step after the last row finished."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.counts = torch.zeros(2, dtype=torch.long, pin_memory=self.cuda)
        self.events = [torch.cuda.Event() if self.cuda else None for _ in range(2)]

    def push(self, step: int, finished: torch.Tensor) -> None:
        self.counts[step % 2].copy_((~finished).sum(), non_blocking=True)
        if self.cuda:
            self.events[step % 2].record()

    def read(self, step: int) -> int:
        if self.cuda:
            self.events[step % 2].synchronize()
        return int(self.counts[step % 2])


@dataclass
class KeptRow:
    """A sample row's cache kept for the next turn: the cache row it sits in, the columns holding its tokens' keys
    and values (in order) and those tokens (its prompt and all but the last sampled token)."""

    slot: int
    columns: torch.Tensor
    ids: tuple[int, ...]


class StaticCacheEngine(BatchedEngine):
    """Static KV cache and one decode step over the policy's own modules; CUDA graphs on GPU, eager on CPU."""

    def __init__(self, model, tokenizer, batch_size: int = 256):
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.all_finished: Callable[[bool], bool] = bool  # the hf engine's hook; unused without FSDP2
        self.lm = causal_lm(model)
        self.config = self.lm.config
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.eos = torch.tensor(eos_ids(self.lm, tokenizer))
        first = self.lm.model.layers[0].self_attn
        self.head_dim = first.head_dim
        self.kv_heads = getattr(self.config, "num_key_value_heads", None) or self.config.num_attention_heads
        self.groups = self.config.num_attention_heads // self.kv_heads  # query heads per key/value head (GQA)
        self.windows = [self._window(layer.self_attn) for layer in self.lm.model.layers]
        self.rope = sys.modules[type(first).__module__].apply_rotary_pos_emb  # the family's own rotate-half RoPE
        self.cache: KVCache | None = None
        self.graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self.graph_pool = None
        self.weights_at: tuple[int, ...] = ()
        self.capture_s = 0.0  # one-time cost: seconds spent capturing graphs (warm-up and compilation included)
        # compile_layers(): torch.compile one decoder layer's step (fusing the elementwise work between the matmuls);
        # every layer reuses the compiled code (regional compilation), captured into the graphs like the rest.
        self.compiled_layer: Callable[..., torch.Tensor] | None = None
        # Steps run at power-of-two batch sizes over all cache columns (the shapes graphs are captured for); on a
        # CPU, exactly the live rows and the columns in use. Tests turn it on on a CPU to run the CUDA layout.
        self.static_shapes = self.uses_graphs
        # Multi-turn sessions: `keep_turns` (on by default) keeps rows' caches between the calls of a `session()`.
        self.keep_turns = True
        self.keeping = False
        self.kept: dict[int, dict[tuple[int, ...], KeptRow]] = {}  # by the number of cached tokens
        self.reused_tokens = 0  # prompt tokens whose keys/values came from a kept row instead of a prefill

    @contextmanager
    def session(self) -> Iterator[None]:
        """Calls inside continue the rows of the previous call whose tokens their prompts extend (the weights must
        not change inside; rlvr.rollout.episodes plays one batch of episodes in one session)."""
        self.keeping, self.kept = self.keep_turns, {}
        try:
            yield
        finally:
            self.keeping, self.kept = False, {}

    def _window(self, attn) -> int | None:
        """The layer's sliding window (Qwen2/Qwen3 per layer type, Mistral for every layer), or None."""
        if hasattr(attn, "sliding_window"):
            return attn.sliding_window
        return getattr(self.config, "sliding_window", None)

    # ------------------------------------------------------------------ buffers

    @property
    def device(self) -> torch.device:
        return self.lm.model.embed_tokens.weight.device

    @property
    def uses_graphs(self) -> bool:
        return self.device.type == "cuda"

    def _prepare(self, rows: int, columns: int) -> None:
        """A cache with at least `rows` x `columns` (grown, never shrunk), RoPE tables and static step buffers."""
        dtype, device = self.lm.model.embed_tokens.weight.dtype, self.device
        if self.static_shapes:
            columns = -(-columns // COLUMN_MULTIPLE_CUDA) * COLUMN_MULTIPLE_CUDA
        c = self.cache
        if c is not None and c.rows >= rows and c.columns >= columns and c.k[0].dtype == dtype and \
                c.k[0].device == device:
            return
        if c is not None:
            rows, columns = max(rows, c.rows), max(columns, c.columns)
        self.graphs, self.cache = {}, None  # free the old buffers (and the graphs reading them) first
        self.cache = KVCache(len(self.lm.model.layers), rows, columns, self.kv_heads, self.head_dim, dtype, device)
        probe = torch.zeros((), dtype=dtype, device=device)
        cos, sin = self.lm.model.rotary_emb(probe, torch.arange(columns, device=device)[None])
        self.cos, self.sin = cos[0], sin[0]
        self.tokens = torch.zeros(rows, dtype=torch.long, device=device)
        self.positions = torch.zeros(rows, dtype=torch.long, device=device)
        self.column = torch.zeros(1, dtype=torch.long, device=device)
        self.logits = torch.zeros((rows, self.config.vocab_size), dtype=dtype, device=device)

    # ------------------------------------------------------------------ the model

    def _forward(self, ids: torch.Tensor, positions: torch.Tensor, columns: torch.Tensor, width: int,
                 decoding: bool = False) -> torch.Tensor:
        """Logits of the last of `ids` [b, q] at RoPE `positions` [b, q], their keys/values written into cache
        columns `columns` [q]; attention over the first `width` cache columns. Decoding steps run the compiled
        layer when there is one (prefills, of varying shapes, never do)."""
        b, q = ids.shape
        inner, c = self.lm.model, self.cache
        h = inner.embed_tokens(ids)
        cos, sin = self.cos[positions], self.sin[positions]
        key_columns = torch.arange(width, device=ids.device)
        allowed = c.valid[:b, None, None, :width] & (key_columns <= columns[:, None])  # [b, 1, q, width]
        allowed |= key_columns == columns[:, None]  # a query always sees itself (no empty rows at padding)
        masks: dict[int | None, torch.Tensor] = {None: allowed}
        for window in set(self.windows) - {None}:
            recent = c.position[:b, None, None, :width] > positions[:, None, :, None] - window
            masks[window] = allowed & recent
        layer_step = self.compiled_layer if decoding and self.compiled_layer is not None else self._layer_step
        for i, layer in enumerate(inner.layers):
            h = layer_step(layer, h, cos, sin, masks[self.windows[i]], c.k[i][:b, :, :width], c.v[i][:b, :, :width],
                           columns)
        return self.lm.lm_head(inner.norm(h[:, -1]))

    def _layer_step(self, layer: torch.nn.Module, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                    mask: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, columns: torch.Tensor
                    ) -> torch.Tensor:
        """One decoder layer over `h` [b, q, hidden], its keys/values written into the cache views at `columns`."""
        b, q = h.shape[:2]
        attn = layer.self_attn
        x = layer.input_layernorm(h)
        shape = (b, q, -1, self.head_dim)
        queries, keys, values = attn.q_proj(x).view(shape), attn.k_proj(x).view(shape), attn.v_proj(x).view(shape)
        if hasattr(attn, "q_norm"):  # Qwen3: RMSNorm over each head's dimension
            queries, keys = attn.q_norm(queries), attn.k_norm(keys)
        queries, keys = self.rope(queries.transpose(1, 2), keys.transpose(1, 2), cos, sin)
        k_cache.index_copy_(2, columns, keys)
        v_cache.index_copy_(2, columns, values.transpose(1, 2))
        out = self._attention(queries, k_cache, v_cache, mask, attn.scaling)
        h = h + attn.o_proj(out.transpose(1, 2).reshape(b, q, -1))
        return h + layer.mlp(layer.post_attention_layernorm(h))

    def _attention(self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor,
                   scale: float) -> torch.Tensor:
        """SDPA with GQA. One query per row (decoding): the query heads sharing a key/value head become that head's
        queries, so no key/value is repeated and a fused kernel with a mask applies."""
        b, heads, q, d = queries.shape
        if self.groups == 1:
            return F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, scale=scale)
        if q == 1:
            packed = queries.reshape(b, self.kv_heads, self.groups, d)
            out = F.scaled_dot_product_attention(packed, keys, values, attn_mask=mask, scale=scale)
            return out.reshape(b, heads, 1, d)  # fused kernels may return a transposed layout
        return F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, scale=scale, enable_gqa=True)

    def _decode_step(self, b: int, width: int) -> None:
        """The step a graph captures: the static `tokens`/`positions`/`column` in, `logits` out."""
        c = self.cache
        c.valid[:b].index_fill_(1, self.column, True)
        c.position[:b].index_copy_(1, self.column, self.positions[:b, None])
        self.logits[:b] = self._forward(self.tokens[:b, None], self.positions[:b, None], self.column, width,
                                        decoding=True)

    def compile_layers(self) -> None:
        """Run decoder layers through torch.compile from the next step on (off by default; the first step of each
        new shape compiles, counted in capture_s on CUDA)."""
        self.compiled_layer = torch.compile(self._layer_step, dynamic=False)
        self.graphs = {}

    def _run_step(self, b: int, width: int) -> None:
        if not self.uses_graphs:
            self._decode_step(b, width)
            return
        graph = self.graphs.get((b, width))
        if graph is None:
            t0 = time.perf_counter()
            step = self._decode_step
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up outside capture; rewrites this step's own keys, so harmless
                for _ in range(2):  # (lazy initialisation, compilation)
                    step(b, width)
            torch.cuda.current_stream().wait_stream(side)
            self.graph_pool = self.graph_pool or torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.graph_pool):
                step(b, width)
            self.graphs[(b, width)] = graph
            torch.cuda.synchronize()
            self.capture_s += time.perf_counter() - t0
        graph.replay()

    def _check_weights(self) -> None:
        """Graphs read parameters by address: an update in place is seen, but a replaced tensor (load_state_dict
        with assign, .to()) needs a recapture."""
        at = tuple(p.data_ptr() for p in self.lm.parameters())
        if at != self.weights_at:
            self.graphs, self.weights_at = {}, at

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: list[list[int]], params: SamplingParams,
                 generators: list[torch.Generator] | None = None) -> list[list[Completion]]:
        self._check_weights()
        return super().generate(prompts, params, generators)

    def _prefill(self, prompts: list[list[int]], n: int, width: int) -> tuple[int, torch.Tensor, list[torch.Tensor]]:
        """Fill the cache with the prompts (left-padded to a common length P) and copy each prompt's cache to the
        rows of its n samples; returns P, the prompts' last logits, one row per sample, and each sample's prompt
        columns."""
        device, c = self.device, self.cache
        g, p = len(prompts), max(len(x) for x in prompts)
        ids = torch.full((g, p), self.pad_id, dtype=torch.long)
        mask = torch.zeros((g, p), dtype=torch.bool)
        for row, x in enumerate(prompts):
            ids[row, p - len(x) :] = torch.tensor(x)
            mask[row, p - len(x) :] = True
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        c.valid.zero_()
        c.valid[:g, :p] = mask
        c.position[:g, :p] = positions
        logits = self._forward(ids, positions, torch.arange(p, device=device), width)
        rows = g * n
        if n > 1:
            for buffers in (c.k, c.v):
                for buf in buffers:
                    buf[:rows, :, :p] = buf[:g, :, :p].repeat_interleave(n, 0)
            c.valid[:rows, :p] = mask.repeat_interleave(n, 0)
            c.position[:rows, :p] = positions.repeat_interleave(n, 0)
        self.positions[:rows] = positions[:, -1].repeat_interleave(n)
        columns = [torch.arange(p - len(x), p, device=device) for x in prompts for _ in range(n)]
        return p, logits.repeat_interleave(n, 0), columns

    def _continuing(self, prompts: list[list[int]], n: int) -> list[KeptRow] | None:
        """The kept row each prompt extends (by at least one token), or None unless every prompt has one."""
        if not self.keeping or n != 1 or not self.kept:
            return None
        found = []
        for x in prompts:
            row = next((kept[key] for length, kept in sorted(self.kept.items(), reverse=True) if length < len(x)
                        and (key := tuple(x[:length])) in kept), None)
            if row is None:
                return None
            found.append(row)
        return found

    def _continue(self, prompts: list[list[int]], kept: list[KeptRow], steps: int
                  ) -> tuple[int, torch.Tensor, list[torch.Tensor], int]:
        """Prefill only what each prompt adds to its kept row: the kept keys/values move to rows 0..g-1,
        right-aligned at column H (the longest kept), and the new tokens, left-padded to a common length q, go to
        columns H..H+q. Returns H + q, the last logits, each row's prompt columns, and the cache width."""
        device, g = self.device, len(prompts)
        h = max(len(r.ids) for r in kept)
        new = [x[len(r.ids):] for x, r in zip(prompts, kept)]
        q = max(map(len, new))
        source = torch.zeros((g, h), dtype=torch.long, device=device)
        held = torch.zeros((g, h), dtype=torch.bool, device=device)
        for i, r in enumerate(kept):
            source[i, h - len(r.ids):] = r.columns
            held[i, h - len(r.ids):] = True
        slots = torch.tensor([r.slot for r in kept], device=device)
        c = self.cache
        gather = source[:, None, :, None].expand(g, self.kv_heads, h, self.head_dim)
        moved = [buf[slots].gather(2, gather) for buf in c.k + c.v]
        position = c.position[slots].gather(1, source)
        self._prepare(bucket_size(g, sys.maxsize, self.static_shapes), h + q + steps)
        c = self.cache
        width = c.columns if self.static_shapes else h + q + steps
        for buf, value in zip(c.k + c.v, moved):
            buf[:g, :, :h] = value
        c.valid.zero_()
        c.valid[:g, :h] = held
        c.position[:g, :h] = position
        ids = torch.full((g, q), self.pad_id, dtype=torch.long)
        mask = torch.zeros((g, q), dtype=torch.bool)
        positions = torch.zeros((g, q), dtype=torch.long)
        for i, (x, r) in enumerate(zip(new, kept)):
            ids[i, q - len(x):] = torch.tensor(x)
            mask[i, q - len(x):] = True
            positions[i, q - len(x):] = torch.arange(len(r.ids), len(r.ids) + len(x))
        ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
        c.valid[:g, h : h + q] = mask
        c.position[:g, h : h + q] = positions
        logits = self._forward(ids, positions, torch.arange(h, h + q, device=device), width)
        self.positions[:g] = positions[:, -1]
        self.reused_tokens += sum(len(r.ids) for r in kept)
        columns = [torch.cat([torch.arange(h - len(r.ids), h, device=device),
                              torch.arange(h + q - len(x), h + q, device=device)]) for x, r in zip(new, kept)]
        return h + q, logits, columns, width

    @torch.no_grad()
    def _generate_batch(self, prompts: list[list[int]], params: SamplingParams,
                        generators: list[torch.Generator] | None) -> list[Completion]:
        device, n, steps = self.device, params.n, params.max_new_tokens
        rows = len(prompts) * n
        kept, self.kept = self._continuing(prompts, n), {}
        if kept is not None:
            p, logits, prompt_columns, width = self._continue(prompts, kept, steps)
        else:
            self._prepare(bucket_size(rows, sys.maxsize, self.static_shapes), max(len(x) for x in prompts) + steps)
            width = self.cache.columns if self.static_shapes else max(len(x) for x in prompts) + steps
            p, logits, prompt_columns = self._prefill(prompts, n, width)
        eos = self.eos.to(device)
        # Outputs per sample row, plus one spare row (index `rows`) that padding slots write into.
        tokens = torch.full((rows + 1, steps), self.pad_id, dtype=torch.long, device=device)
        logps = torch.zeros((rows + 1, steps), device=device)
        entropies = torch.zeros((rows + 1, steps), device=device) if params.return_entropy else None
        lengths = torch.full((rows + 1,), steps, dtype=torch.long, device=device)
        done_rows = torch.zeros(rows + 1, dtype=torch.bool, device=device)
        b = bucket_size(rows, self.cache.rows, self.static_shapes)
        slot_rows = torch.full((b,), rows, dtype=torch.long, device=device)  # which sample each batch slot holds
        slot_rows[:rows] = torch.arange(rows, device=device)
        slot_of = torch.arange(rows, device=device)  # the cache row each sample row sits in
        finished = slot_rows == rows
        self.logits[:rows] = logits
        # One number per sample row and step (inverse_cdf), drawn up front: each group from its own generator, so its
        # numbers depend neither on the rest of the batch nor on when the batch stops.
        uniform = torch.zeros(rows + 1, steps, device=device)
        if generators is None:
            uniform.uniform_()
        else:
            for g, generator in enumerate(generators):
                uniform[g * n : (g + 1) * n].uniform_(generator=generator)
        live = LiveCount(device)
        for step in range(steps):
            WATCH.progress()
            logits = self.logits[:b]
            draw = partial(inverse_cdf, uniform=uniform[slot_rows, step])
            tok, logp, entropy = next_tokens(logits, step, params, eos, draw)
            tok = torch.where(finished, self.pad_id, tok)
            tokens[slot_rows, step], logps[slot_rows, step] = tok, logp
            if entropies is not None:
                entropies[slot_rows, step] = entropy
            done = finished | torch.isin(tok, eos)
            if params.stop:
                done |= stop_reached(self.tokenizer, tokens[slot_rows, max(0, step - 64) : step + 1], finished,
                                     params.stop)
            lengths[slot_rows] = torch.where(done & ~finished, step + 1, lengths[slot_rows])
            done_rows[slot_rows] = done
            finished = done
            live.push(step, finished)
            alive = live.read(step - 1 if step else 0)  # at least the rows live now (rows only ever finish)
            if self.all_finished(alive == 0) or step == steps - 1:
                break
            smaller = bucket_size(alive, self.cache.rows, self.static_shapes)
            if smaller <= b // 2:  # compaction: the live rows move to the front of a smaller bucket
                order = torch.argsort(finished.to(torch.int8), stable=True)  # live rows first, in order
                if self.keeping:  # the finished rows' caches survive for the next turn
                    moved = slot_of < b
                    slot_of[moved] = torch.argsort(order)[slot_of[moved]]
                self.cache.keep_rows(order if self.keeping else order[:smaller])
                keep = order[:smaller]  # every live row, and rows that finished since `alive` was counted
                self.positions[:smaller] = self.positions[keep]
                slot_rows, tok, finished, b = slot_rows[keep], tok[keep], finished[keep], smaller
            self.tokens[:b] = tok
            self.positions[:b] += 1
            self.column.fill_(p + step)
            self._run_step(b, width)
        if self.keeping:
            self._keep(prompts, n, p, prompt_columns, slot_of, tokens[:rows], lengths[:rows])
        return self._completions(tokens[:rows], logps[:rows], entropies, lengths[:rows], done_rows[:rows])

    def _keep(self, prompts: list[list[int]], n: int, p: int, prompt_columns: list[torch.Tensor],
              slot_of: torch.Tensor, tokens: torch.Tensor, lengths: torch.Tensor) -> None:
        """Remember each sample row's cache: its prompt and every sampled token but the last (which was never fed
        back) sit in its prompt columns and columns p, p+1, ..."""
        device = self.device
        for row, (slot, length) in enumerate(zip(slot_of.tolist(), lengths.tolist())):
            ids = (*prompts[row // n], *tokens[row, : length - 1].tolist())
            columns = torch.cat([prompt_columns[row], torch.arange(p, p + length - 1, device=device)])
            self.kept.setdefault(len(ids), {})[ids] = KeptRow(slot, columns, ids)

    def _completions(self, tokens, logps, entropies, lengths, done) -> list[Completion]:
        tokens, logps = tokens.tolist(), logps.tolist()
        entropies = entropies[: len(tokens)].tolist() if entropies is not None else [[] for _ in tokens]
        out = []
        for row, (length, finished) in enumerate(zip(lengths.tolist(), done.tolist())):
            toks = tokens[row][:length]
            out.append(Completion(token_ids=toks, text=self.tokenizer.decode(toks, skip_special_tokens=True),
                                  logprobs=logps[row][:length], truncated=not finished,
                                  entropies=entropies[row][:length]))
        return out


@ENGINES.register("static")
def static_engine(model, tokenizer, batch_size: int = 256):
    """Static KV cache over the policy's own modules (Llama, Qwen2, Qwen3, Mistral); CUDA graphs on GPU, eager on
    CPU. Other models fall back to hf with a message."""
    if is_vision_model(causal_lm(model)):
        raise ConfigError("rollout.engine=static does not prefill image features: a vision-language model generates "
                          "with rollout.engine=hf (or auto, which picks hf for it).")
    reason = unsupported_reason(model)
    if reason is not None:
        print(f"note: rollout.engine=static {reason}; generating with the hf engine instead", file=sys.stderr)
        return HFRolloutEngine(model, tokenizer, batch_size)
    return StaticCacheEngine(model, tokenizer, batch_size)
