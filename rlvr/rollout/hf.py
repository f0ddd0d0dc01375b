"""A rollout engine on plain transformers modules: a decode loop over the model's own forward with a
DynamicCache. Each prompt is prefilled once and its cache shared by its n samples."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
from transformers import DynamicCache

from rlvr.models.kv_cache import cache_keyword
from rlvr.models.vision import collate_inputs, image_placeholder_ids, model_positions, next_positions, prompt_inputs
from rlvr.rollout.base import ENGINES, BatchedEngine, Completion, SamplingParams
from rlvr.rollout.sampling import next_tokens, stop_reached, stop_window
from rlvr.watchdog import WATCH


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
class HFRolloutEngine(BatchedEngine):
    """Sampling with the policy's own transformers modules; reads the live weights (no copy)."""

    def __init__(self, model, tokenizer, batch_size: int = 256):
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        # Decides when a batch is done from this process's rows being done; under FSDP2 it is set to wait for
        # every rank (each forward is a collective), see rlvr.distributed.all_ranks.
        self.all_finished: Callable[[bool], bool] = bool
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.eos = torch.tensor(eos_ids(model, tokenizer))
        # A vision-language model's image placeholder tokens: sampled in a completion, they would ask for pixels.
        self.placeholders = image_placeholder_ids(model)


    @torch.no_grad()  # not inference_mode: inference tensors would end up in FSDP2's all-gather buffers
    def _generate_batch(self, prompts: list[list[int]], params: SamplingParams,
                        generators: list[torch.Generator] | None) -> list[Completion]:
        device = next(self.model.parameters()).device
        if self.placeholders:
            params = replace(params, suppress_tokens=tuple(sorted({*params.suppress_tokens, *self.placeholders})))
        n, width = params.n, max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):  # left padding
            ids[row, width - len(p) :] = torch.tensor(p)
            mask[row, width - len(p) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        extra = collate_inputs([prompt_inputs(p) for p in prompts], device)  # images of a vision-language prompt
        positions = model_positions(self.model, ids, mask, extra)
        cache = DynamicCache(config=self.model.config)
        cache_kw = cache_keyword(self.model)
        logits = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1,
            **{cache_kw: cache}, **extra,
        ).logits[:, -1]
        next_pos = next_positions(positions)
        # Share the prefill among the n samples of each prompt.
        if n > 1:
            cache.batch_repeat_interleave(n)
            logits, mask = logits.repeat_interleave(n, 0), mask.repeat_interleave(n, 0)
            next_pos = next_pos.repeat_interleave(n, 0)
        batch = logits.shape[0]
        # The attention mask for every decode step, allocated once: prompt mask, then ones.
        mask = torch.cat([mask, torch.ones((batch, params.max_new_tokens), dtype=mask.dtype, device=device)], dim=1)
        eos = self.eos.to(device)
        finished = torch.zeros(batch, dtype=torch.bool, device=device)
        lengths = torch.full((batch,), params.max_new_tokens, dtype=torch.long, device=device)
        tokens, logps, entropies = [], [], []
        for step in range(params.max_new_tokens):
            WATCH.progress()
            tok, logp, entropy = next_tokens(logits, step, params, eos, lambda probs: sample_tokens(probs, n, generators))
            tok = torch.where(finished, torch.full_like(tok, self.pad_id), tok)
            tokens.append(tok)
            logps.append(logp)
            if entropy is not None:
                entropies.append(entropy)
            done = finished | torch.isin(tok, eos)
            if params.stop:
                done |= stop_reached(self.tokenizer, torch.stack(tokens[-stop_window(params.stop) :], 1), finished,
                                     params.stop)
            lengths = torch.where(done & ~finished, step + 1, lengths)
            finished = done
            if self.all_finished(bool(finished.all())) or step == params.max_new_tokens - 1:
                break
            logits = self.model(
                input_ids=tok[:, None], attention_mask=mask[:, : width + step + 1], position_ids=next_pos[:, None],
                use_cache=True, **{cache_kw: cache},
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
