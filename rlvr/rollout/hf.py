"""A rollout engine on plain transformers modules: a decode loop over the model's own forward with a
DynamicCache. Each prompt is prefilled once and its cache shared by its n samples."""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers import DynamicCache

from rlvr.rollout.base import ENGINES, Completion, SamplingParams


def filter_logits(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Mask logits outside the top-k tokens and outside the smallest set with cumulative probability >= top_p."""
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop_sorted = cum - sorted_logits.softmax(-1) >= top_p  # keep the token that crosses top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def sample_tokens(probs: torch.Tensor, n: int, generators: list[torch.Generator] | None) -> torch.Tensor:
    """One token per row of `probs`; with `generators`, rows [i*n, (i+1)*n) (prompt i's samples) draw from
    generators[i] only."""
    if generators is None:
        return torch.multinomial(probs, 1).squeeze(-1)
    return torch.cat([torch.multinomial(probs[i * n : (i + 1) * n], 1, generator=g).squeeze(-1)
                      for i, g in enumerate(generators)])


def eos_ids(model, tokenizer) -> list[int]:
    ids = {tokenizer.eos_token_id}
    gen = getattr(model, "generation_config", None)
    extra = getattr(gen, "eos_token_id", None) if gen is not None else None
    ids.update(extra if isinstance(extra, list) else [extra])
    return sorted(i for i in ids if i is not None)


@ENGINES.register("hf")
class HFRolloutEngine:
    """Sampling with the policy's own transformers modules; reads the live weights (no copy)."""

    def __init__(self, model, tokenizer, batch_size: int = 256):
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        # Decides when a batch is done from this process's rows being done; under FSDP2 it is set to wait for
        # every rank (each forward is a collective), see rlvr.distributed.all_ranks.
        self.all_finished: Callable[[bool], bool] = bool
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.eos = torch.tensor(eos_ids(model, tokenizer))

    def generate(self, prompts: list[list[int]], params: SamplingParams,
                 generators: list[torch.Generator] | None = None) -> list[list[Completion]]:
        per_batch = max(1, self.batch_size // params.n)
        out: list[list[Completion]] = []
        was_training = self.model.training
        self.model.eval()
        try:
            for i in range(0, len(prompts), per_batch):
                flat = self._generate_batch(prompts[i : i + per_batch], params,
                                            generators[i : i + per_batch] if generators is not None else None)
                out.extend(flat[j : j + params.n] for j in range(0, len(flat), params.n))
        finally:
            self.model.train(was_training)
        return out

    @torch.no_grad()  # not inference_mode: inference tensors would end up in FSDP2's all-gather buffers
    def _generate_batch(self, prompts: list[list[int]], params: SamplingParams,
                        generators: list[torch.Generator] | None) -> list[Completion]:
        device = next(self.model.parameters()).device
        n, width = params.n, max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):  # left padding
            ids[row, width - len(p) :] = torch.tensor(p)
            mask[row, width - len(p) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=self.model.config)
        logits = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True,
            logits_to_keep=1,
        ).logits[:, -1]
        # Share the prefill among the n samples of each prompt.
        if n > 1:
            cache.batch_repeat_interleave(n)
            logits, mask = logits.repeat_interleave(n, 0), mask.repeat_interleave(n, 0)
            positions = positions.repeat_interleave(n, 0)
        batch = logits.shape[0]
        # The attention mask for every decode step, allocated once: prompt mask, then ones.
        mask = torch.cat([mask, torch.ones((batch, params.max_new_tokens), dtype=mask.dtype, device=device)], dim=1)
        next_pos = positions[:, -1] + 1
        eos = self.eos.to(device)
        finished = torch.zeros(batch, dtype=torch.bool, device=device)
        lengths = torch.full((batch,), params.max_new_tokens, dtype=torch.long, device=device)
        tokens, logps, entropies = [], [], []
        for step in range(params.max_new_tokens):
            scaled = logits.float() / params.temperature
            logp_all = torch.log_softmax(scaled, dim=-1)
            sample_from = scaled
            if step < params.min_new_tokens:  # a sampling constraint, like top-k: not in the logprobs
                sample_from = scaled.index_fill(-1, eos, float("-inf"))
            if params.greedy:
                tok = sample_from.argmax(-1)
            else:
                probs = filter_logits(sample_from, params.top_k, params.top_p).softmax(-1)
                tok = sample_tokens(probs, n, generators)
            tok = torch.where(finished, torch.full_like(tok, self.pad_id), tok)
            tokens.append(tok)
            logps.append(logp_all.gather(-1, tok[:, None]).squeeze(-1))
            if params.return_entropy:
                entropies.append(-(logp_all.exp() * logp_all).sum(-1))
            done = finished | torch.isin(tok, eos)
            if params.stop:
                done |= self._stop_reached(tokens, finished, params.stop)
            lengths = torch.where(done & ~finished, step + 1, lengths)
            finished = done
            if self.all_finished(bool(finished.all())) or step == params.max_new_tokens - 1:
                break
            logits = self.model(
                input_ids=tok[:, None], attention_mask=mask[:, : width + step + 1], position_ids=next_pos[:, None], past_key_values=cache,
                use_cache=True,
            ).logits[:, -1]
            next_pos = next_pos + 1
        tokens, logps = torch.stack(tokens, 1).tolist(), torch.stack(logps, 1).tolist()
        entropies = torch.stack(entropies, 1).tolist() if entropies else [[] for _ in tokens]
        out = []
        for row, (length, done) in enumerate(zip(lengths.tolist(), finished.tolist())):
            toks = tokens[row][:length]
            text = self.tokenizer.decode(toks, skip_special_tokens=True)
            out.append(Completion(token_ids=toks, text=text, logprobs=logps[row][:length], truncated=not done,
                                  entropies=entropies[row][:length]))
        return out

    def _stop_reached(self, tokens: list[torch.Tensor], finished: torch.Tensor, stops: list[str]) -> torch.Tensor:
        """Rows (not yet finished) whose recent text contains a stop string."""
        window = max(len(s) for s in stops) + 4  # every token is at least one character; a little slack
        recent = torch.stack(tokens[-window:], 1).tolist()
        hit = torch.zeros_like(finished)
        for row in (~finished).nonzero().flatten().tolist():
            text = self.tokenizer.decode(recent[row], skip_special_tokens=True)
            hit[row] = any(s in text for s in stops)
        return hit
