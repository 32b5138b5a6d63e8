"""GRPO's update with each group's prompt computed once.

The G completions of a GRPO group share one prompt, and TRL's update runs the model over
prompt + completion for each of them: for the learning experiment's ~700-token improve prompt
and ~200-token answers, most of the forward and backward is the same prompt G times. Here the
rows of a micro-batch that share a prompt are computed as one prefix forward (its keys and
values kept in a cache, with their graph) and one forward of their completions over that cache,
expanded to the group. The backward through the expansion sums the rows' gradients into the
prefix, so loss and gradients are the same computation, in another order (float noise:
`tests/training/test_shared_prefix.py` compares both on a fixed batch).

Under gradient checkpointing (which turns the model's cache off) the update is TRL's own.

TRL shuffles a step's rows before it splits them into micro-batches, so a micro-batch of G rows
held rows of about three prompts (of five, G 4) and computed three prefixes, not one. Here the
shuffle moves whole groups: each micro-batch of G rows is one group (`shuffle_whole_groups`).
For the loss types whose gradient is a sum over rows that does not depend on which rows share
a micro-batch (`ORDER_FREE_LOSSES`: each micro-batch's rows weigh the same, or its tokens are
normalized by the whole batch's), the step's update is the same computation; the others keep
TRL's row shuffle. (Where one generation feeds several optimizer steps, each of them now gets
whole groups: another draw of which rows share a step, not another loss.)

Rotary position embeddings make the result independent of the prompt's left padding: TRL's
padded rows and the unpadded prefix here see the same relative positions.

TRL pads every completion to the batch's longest. Here each completion is computed only up to its
own last unmasked token, in a forward of its own over the prefix's cache: attention is causal,
so a real token never sees the padding after it, and the positions cut off are masked out of
the loss (they get log-probability 0 here). In a real step most answers end well before the
longest of their group, so a group batched to its longest computed mostly padding.

The trainer hands the loss's mask down (`_compute_loss`): logits (49,152 per position, kept for
the backward) are computed only where a token counts in the loss. A multi-turn completion is
mostly the gym's feedback, masked out of the loss, so most of its logits were never used.

The log-probability of the chosen token is its logit less the row's log-sum-exp: the same
number as log-softmax then gather, without writing a vocabulary-wide log-softmax and its
gradient for every position.
"""
from __future__ import annotations

from typing import Any


LAYOUTS = ("rows", "group", "padded")


def shared_prefix_logps(model: Any, input_ids, attention_mask, logits_to_keep: int,
                        compute_entropy: bool = False, autocast=None, layout: str = "rows",
                        loss_mask=None):
    """Per-token log-probabilities (and entropies) of the last `logits_to_keep` tokens of each
    row, as TRL's `_get_per_token_logps_and_entropies` returns them, with rows that share a
    prompt computed over one prefix forward. Returns (logps, entropies or None).

    `layout` says how the completions of a prompt are run over its prefix: "rows" (what GRPO
    runs), each in a forward of its own up to its last unmasked token; "group", all in one
    batch cut to the group's longest; "padded", all in one batch at the batch's width (the last
    two are what benchmarks/update_speed.py compares).

    `loss_mask` (rows x `logits_to_keep`, 1 where a token counts in the loss): logits are
    computed only where it is 1, and the other positions get 0. A multi-turn completion is
    mostly the gym's feedback (masked out of the loss): its ~1,600 positions of 49,152 logits
    each were 0.3 GB per row, kept for the backward, and as much again for the entropy."""
    import contextlib

    import torch
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: choose one of {', '.join(LAYOUTS)}")
    C = logits_to_keep
    prompts, masks = input_ids[:, :-C], attention_mask[:, :-C]
    groups: dict[tuple, list[int]] = {}
    for row in range(input_ids.size(0)):
        valid = prompts[row][masks[row].bool()]
        groups.setdefault(tuple(valid.tolist()), []).append(row)
    logps_rows, entropy_rows = [None] * input_ids.size(0), [None] * input_ids.size(0)
    cache_argument = _cache_argument(model)
    for prompt, rows in groups.items():
        prefix = torch.tensor([prompt], dtype=input_ids.dtype, device=input_ids.device)
        with autocast() if autocast else contextlib.nullcontext():
            head = model(input_ids=prefix, attention_mask=torch.ones_like(prefix),
                         use_cache=True, logits_to_keep=1)
            cache = getattr(head, "cache", None) or head.past_key_values
            batches = [[row] for row in rows] if layout == "rows" else [rows]
            for batch in batches:
                completion_mask = attention_mask[batch, -C:]
                width = C
                if layout != "padded":  # up to the last unmasked position: the rest is cut
                    used = completion_mask.any(dim=0).nonzero()
                    width = int(used.max()) + 1 if used.numel() else 1
                completions = input_ids[batch, -C:][:, :width]
                # the completion positions whose log-probabilities are computed
                if loss_mask is None:
                    cols = torch.arange(width, device=input_ids.device)
                else:
                    cols = loss_mask[batch, :width].bool().any(dim=0).nonzero().squeeze(-1)
                # token j of a completion is predicted by the position before it: the prompt's
                # last position for the first, the completion's own positions for the rest
                first = int(cols.numel() > 0 and cols[0] == 0)  # token 0: the head's logits
                body = model(input_ids=completions,
                             **{cache_argument: _expanded(model, cache, len(batch))},
                             use_cache=True, logits_to_keep=cols[first:] - 1,
                             attention_mask=torch.cat([
                                 torch.ones(len(batch), prefix.size(1),
                                            dtype=attention_mask.dtype,
                                            device=attention_mask.device),
                                 completion_mask[:, :width]], dim=1))
                logits = torch.cat([head.logits[:, -1:].expand(len(batch), first, -1),
                                    body.logits], dim=1).float()
                norm = torch.logsumexp(logits, dim=-1)
                tokens = completions[:, cols]
                picked = logits.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) - norm
                zeros = picked.new_zeros(len(batch), C)
                logps = zeros.index_copy(1, cols, picked)  # 0 where not computed
                if compute_entropy:
                    with torch.no_grad():
                        log_probs = logits - norm.unsqueeze(-1)
                        entropies = zeros.detach().index_copy(
                            1, cols, -(log_probs.exp() * log_probs).sum(-1))
                        del log_probs
                for i, row in enumerate(batch):
                    logps_rows[row] = logps[i]
                    if compute_entropy:
                        entropy_rows[row] = entropies[i]
    return torch.stack(logps_rows), torch.stack(entropy_rows) if compute_entropy else None


def _expanded(model: Any, cache: Any, k: int) -> Any:
    """A new cache holding the prefix's keys and values for `k` rows. A forward appends its
    tokens' keys to the cache it is given, and the next batch of the same prompt must start
    from the prefix alone: `cache` is left as it is, and its tensors (with their graph) are
    only read."""
    from transformers import DynamicCache
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return DynamicCache(ddp_cache_data=[(layer.keys.expand(k, -1, -1, -1),
                                         layer.values.expand(k, -1, -1, -1))
                                        for layer in cache.layers], config=inner.config)


def _cache_argument(model: Any) -> str:
    """The forward's name for the key/value cache: `cache` from transformers 5.2x on (where
    `past_key_values` is deprecated), `past_key_values` before."""
    import inspect
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(inner.forward).parameters \
        else "past_key_values"


def _checkpointing(model: Any) -> bool:
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    on = getattr(inner, "is_activation_checkpointing", None)  # (transformers 5.2x's name)
    if on is None:
        on = getattr(inner, "is_gradient_checkpointing", False)
    return bool(on) and inner.training


# loss types whose step gradient does not depend on how rows are split into (equal) micro-batches:
# a per-row mean over rows (grpo, sapo), a constant normalizer (dr_grpo) or the whole batch's
# token count (dapo, cispo). bnpo normalizes by each micro-batch's own tokens: not among them.
ORDER_FREE_LOSSES = ("grpo", "sapo", "dr_grpo", "dapo", "cispo")


def shuffle_whole_groups(batch: dict[str, Any], G: int, row_shuffle) -> dict[str, Any]:
    """`batch`'s rows in a random order of whole groups: the G consecutive rows of each prompt
    stay together and in order. Where the rows are not such groups (a batch not a multiple of
    G, or a block of G rows with more than one prompt), `row_shuffle(batch)` (TRL's)."""
    import torch
    rows = len(next(v for v in batch.values() if v is not None))
    prompts = batch.get("prompt_ids")
    if G < 1 or rows % G or prompts is None or not _blocks_share_prompts(batch, rows, G):
        return row_shuffle(batch)
    order = torch.randperm(rows // G)
    permutation = torch.cat([torch.arange(g * G, (g + 1) * G) for g in order.tolist()])

    def permute(v: Any) -> Any:
        if v is None or (isinstance(v, torch.Tensor) and v.ndim == 0):
            return v
        if isinstance(v, torch.Tensor):
            return v[permutation]
        return [v[i] for i in permutation.tolist()]

    return {key: permute(value) for key, value in batch.items()}


def _blocks_share_prompts(batch: dict[str, Any], rows: int, G: int) -> bool:
    import torch
    ids, mask = batch["prompt_ids"], batch.get("prompt_mask")

    def prompt(row: int):  # (its unpadded tokens)
        return ids[row] if mask is None else ids[row][mask[row].bool()]

    return all(torch.equal(prompt(row), prompt(start))
               for start in range(0, rows, G) for row in range(start + 1, start + G))


def loss_masked(inputs: dict) -> tuple[Any, dict]:
    """(the loss's mask, the inputs with the earlier policies' log-probabilities 0 where it is
    0). The mask is TRL's: completion tokens, less a multi-turn rollout's feedback. A position
    left out of it gets log-probability 0 from `shared_prefix_logps`; with the old policy's
    there unchanged, the ratio exp(0 - old) overflows to inf where old < -88 (float32), and
    inf times the mask's 0 is NaN in the loss."""
    mask = inputs["completion_mask"]
    if inputs.get("tool_mask") is not None:
        mask = mask * inputs["tool_mask"]
    old = {k: inputs[k] * mask for k in ("old_per_token_logps", "sampling_per_token_logps")
           if inputs.get(k) is not None}
    return mask, {**inputs, **old}


def shared_prefix_trainer(base: type) -> type:
    """`base` (TRL's GRPOTrainer) with the shared-prefix update for text-only batches."""

    class SharedPrefixGRPOTrainer(base):
        def _prepare_inputs(self, generation_batch):
            # TRL's own, with its row shuffle swapped for one of whole groups while it runs
            # (the shuffle is a module-level name in TRL's trainer; TRL is pinned)
            if self.loss_type not in ORDER_FREE_LOSSES:
                return super()._prepare_inputs(generation_batch)
            import trl.trainer.grpo_trainer as trl_grpo
            row_shuffle = trl_grpo.shuffle_sequence_dict
            trl_grpo.shuffle_sequence_dict = lambda batch: shuffle_whole_groups(
                batch, self.num_generations, row_shuffle)
            try:
                return super()._prepare_inputs(generation_batch)
            finally:
                trl_grpo.shuffle_sequence_dict = row_shuffle

        def _compute_loss(self, model, inputs):
            # the loss's mask (TRL's: completion tokens, less a multi-turn rollout's feedback)
            # travels to the forward below, which computes logits only where it is 1
            self._loss_mask, inputs = loss_masked(inputs)
            try:
                return super()._compute_loss(model, inputs)
            finally:
                self._loss_mask = None

        def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask,
                                               logits_to_keep, batch_size=None,
                                               compute_entropy=False, compute_aux_loss=False,
                                               **extra):
            if (compute_aux_loss or any(v is not None for v in extra.values())
                    or _checkpointing(model)):
                # images, token types or MoE losses: TRL's own path; and under gradient
                # checkpointing, which turns the cache off (a recomputed layer would add its
                # keys to it twice)
                return super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, batch_size,
                    compute_entropy, compute_aux_loss, **extra)
            loss_mask = getattr(self, "_loss_mask", None)
            if loss_mask is not None and loss_mask.shape != (input_ids.size(0), logits_to_keep):
                loss_mask = None  # (not this batch's: every position)
            logps, entropies = shared_prefix_logps(model, input_ids, attention_mask,
                                                   logits_to_keep, compute_entropy,
                                                   self.accelerator.autocast,
                                                   loss_mask=loss_mask)
            return logps, entropies, None

    SharedPrefixGRPOTrainer.__name__ = f"SharedPrefix{base.__name__}"
    return SharedPrefixGRPOTrainer
