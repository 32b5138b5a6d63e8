"""The shared-prefix update computes what TRL's does: on a fixed batch of two groups with
left-padded prompts and masked completion tails, the per-token log-probabilities, the loss and
every LoRA gradient agree with the plain forward over each whole row (TRL's computation)
within float noise."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
pytest.importorskip("peft", reason="the train extra is not installed: pip install 'perfgym[train]'")

from perfgym.train.shared_prefix import shared_prefix_logps  # noqa: E402
from perfgym.train.tiny import build_tiny_model  # noqa: E402

TOLERANCE = 1e-5  # FP32; the two orders of the same sums differ by rounding only


def plain_logps(model, input_ids, attention_mask, C, entropy: bool = False):
    """TRL's computation: the whole row (left-padded prompt + completion) in one forward,
    log-softmax over the vocabulary, then the chosen token's entry (and the entropy)."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, -C - 1:-1]
    log_probs = torch.log_softmax(logits.float(), -1)
    picked = log_probs.gather(-1, input_ids[:, -C:].unsqueeze(-1)).squeeze(-1)
    if entropy:
        return picked, -(log_probs.exp() * log_probs).sum(-1).detach()
    return picked


@pytest.fixture(scope="module")
def lora_model(tmp_path_factory):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    path = build_tiny_model(tmp_path_factory.mktemp("tiny"), hidden=64)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0,
                                             target_modules=["q_proj", "k_proj", "v_proj",
                                                             "o_proj"], task_type="CAUSAL_LM"))
    for name, p in model.named_parameters():  # LoRA's B starts at 0: give it a gradient path
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.05)
    return model


def batch(short_group: bool = False):
    """Two groups of three rows, TRL's layout: prompts left-padded to the longest, the
    completions after them, each completion's tail past its end masked. `short_group`: every
    row of the second group ends 3 tokens before the batch's longest (the padding the update
    cuts)."""
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(4, 300, (11,), generator=g), torch.randint(4, 300, (7,),
                                                                        generator=g)]
    C, P = 9, 11
    ids, mask = [], []
    for group, prompt in enumerate(prompts):
        for row in range(3):
            completion = torch.randint(4, 300, (C,), generator=g)
            ends = C - 2 * row - (3 if short_group and group else 0)  # at different lengths
            pad = P - len(prompt)
            ids.append(torch.cat([torch.full((pad,), 3), prompt, completion]))
            mask.append(torch.cat([torch.zeros(pad), torch.ones(len(prompt)),
                                   torch.ones(ends), torch.zeros(C - ends)]))
    return torch.stack(ids), torch.stack(mask).long(), C


def loss_and_grads(model, logps, mask):
    model.zero_grad()
    loss = (logps * mask).sum() / mask.sum()
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()
                         if p.requires_grad}


@pytest.mark.parametrize("layout", ["rows", "group", "padded"])
@pytest.mark.parametrize("short_group", [False, True], ids=["groups-to-the-end",
                                                            "a-group-shorter"])
def test_log_probs_loss_and_gradients_agree_with_the_plain_forward(lora_model, short_group,
                                                                   layout):
    """Every layout (each completion in a forward of its own, what GRPO runs; a group in one
    batch cut to its longest; a group at the batch's width) computes TRL's numbers."""
    input_ids, attention_mask, C = batch(short_group)
    cmask = attention_mask[:, -C:].float()
    plain, plain_entropies = plain_logps(lora_model, input_ids, attention_mask, C, entropy=True)
    plain_loss, plain_grads = loss_and_grads(lora_model, plain, cmask)
    shared, entropies = shared_prefix_logps(lora_model, input_ids, attention_mask, C,
                                            compute_entropy=True, layout=layout)
    assert shared.shape == plain.shape and entropies.shape == plain.shape
    assert torch.allclose(shared * cmask, plain.detach() * cmask, atol=TOLERANCE)
    assert torch.allclose(entropies * cmask, plain_entropies * cmask, atol=TOLERANCE)
    assert not entropies.requires_grad
    if layout == "rows":  # each row cut at its own end: the positions after it are 0
        assert (shared * (1 - cmask)).abs().max() == 0
    shared_loss, shared_grads = loss_and_grads(lora_model, shared, cmask)
    assert abs(shared_loss - plain_loss) < TOLERANCE
    assert plain_grads and plain_grads.keys() == shared_grads.keys()
    for name, grad in plain_grads.items():
        assert grad.abs().max() > 0, name  # every LoRA weight gets a gradient
        assert torch.allclose(shared_grads[name], grad, atol=TOLERANCE, rtol=1e-4), name


@pytest.mark.parametrize("layout", ["rows", "group"])
def test_a_loss_mask_computes_logits_only_where_the_loss_counts(lora_model, layout):
    """A multi-turn completion is mostly the gym's feedback, masked out of the loss: with the
    loss mask given, the vocabulary-wide logits are computed at the loss's positions only
    (their memory was most of a multi-turn update's), and the loss and every gradient are
    the plain forward's."""
    input_ids, attention_mask, C = batch()
    cmask = attention_mask[:, -C:].float()
    loss_mask = cmask.clone()
    loss_mask[:, 2:5] = 0  # "feedback" inside every completion
    loss_mask[:3, 0] = 0  # and the first group's first token
    plain = plain_logps(lora_model, input_ids, attention_mask, C)
    plain_loss, plain_grads = loss_and_grads(lora_model, plain, loss_mask)
    positions = []
    hook = lora_model.get_base_model().lm_head.register_forward_hook(
        lambda module, args, out: positions.append(out.shape[0] * out.shape[1]))
    try:
        shared, entropies = shared_prefix_logps(lora_model, input_ids, attention_mask, C,
                                                compute_entropy=True, layout=layout,
                                                loss_mask=loss_mask)
    finally:
        hook.remove()
    assert torch.allclose(shared * loss_mask, plain.detach() * loss_mask, atol=TOLERANCE)
    # not computed: outside the row's mask ("rows"), its group's union of masks ("group")
    computed = loss_mask if layout == "rows" else torch.cat(
        [loss_mask[g:g + 3].amax(0).expand(3, -1) for g in (0, 3)])
    assert (shared * (1 - computed)).abs().max() == 0
    assert (entropies * (1 - computed)).abs().max() == 0
    heads = 2  # one prefix forward per prompt, its last position
    if layout == "rows":  # each row's own positions
        assert sum(positions) == heads + int(loss_mask.sum()) - 3  # (token 0: the head's)
    else:  # a group's union of them, for each of its 3 rows
        assert sum(positions) == heads + sum(3 * (int(loss_mask[g:g + 3].any(0).sum()) - (g == 3))
                                             for g in (0, 3))
    shared_loss, shared_grads = loss_and_grads(lora_model, shared, loss_mask)
    assert abs(shared_loss - plain_loss) < TOLERANCE
    for name, grad in plain_grads.items():
        assert torch.allclose(shared_grads[name], grad, atol=TOLERANCE, rtol=1e-4), name


def test_rows_of_different_prompts_are_not_shared(lora_model):
    """Every row of its own prompt: the same answer as the plain forward, row by row."""
    input_ids, attention_mask, C = batch()
    one_each = [0, 3]
    plain = plain_logps(lora_model, input_ids[one_each], attention_mask[one_each], C)
    shared, _ = shared_prefix_logps(lora_model, input_ids[one_each], attention_mask[one_each],
                                    C)
    cmask = attention_mask[one_each, -C:].float()
    assert torch.allclose(shared * cmask, plain * cmask, atol=TOLERANCE)


def test_a_prompts_second_batch_starts_from_the_prefix_alone(lora_model):
    """Each completion's forward appends its keys to the cache it is handed: the next one of
    the same prompt must not see them. Rows in reverse order (another completion's keys would
    land first) give the same numbers row by row as each row alone."""
    input_ids, attention_mask, C = batch()
    rows = [2, 1, 0]
    together, _ = shared_prefix_logps(lora_model, input_ids[rows], attention_mask[rows], C)
    for i, row in enumerate(rows):
        alone, _ = shared_prefix_logps(lora_model, input_ids[[row]], attention_mask[[row]], C)
        cmask = attention_mask[row, -C:].float()
        assert torch.allclose(together[i] * cmask, alone[0] * cmask, atol=TOLERANCE), row


def test_an_unknown_layout_is_refused(lora_model):
    input_ids, attention_mask, C = batch()
    with pytest.raises(ValueError, match="layout"):
        shared_prefix_logps(lora_model, input_ids, attention_mask, C, layout="diagonal")


def test_under_gradient_checkpointing_the_trainer_takes_trls_own_path(lora_model):
    """Checkpointing turns the model's cache off (a recomputed layer would add its keys twice):
    the trainer's override hands the batch to TRL's own computation."""
    from perfgym.train.shared_prefix import _checkpointing
    inner = lora_model.get_base_model()
    lora_model.train()
    assert not _checkpointing(lora_model)
    inner.gradient_checkpointing_enable()
    try:
        assert _checkpointing(lora_model)
    finally:
        inner.gradient_checkpointing_disable()


def generation_batch(groups: int = 5, G: int = 4):
    """A step's rows as TRL's generation holds them: each prompt's G rows together, prompts
    left-padded (their masks), plus the 0-dim item count TRL keeps beside them."""
    g = torch.Generator().manual_seed(5)
    prompt_ids, prompt_mask = [], []
    for group in range(groups):
        n = 4 + group  # prompts of different lengths: the shorter ones padded on the left
        prompt = torch.randint(4, 300, (n,), generator=g)
        for _ in range(G):
            prompt_ids.append(torch.cat([torch.full((groups + 3 - n,), 3), prompt]))
            prompt_mask.append(torch.cat([torch.zeros(groups + 3 - n), torch.ones(n)]))
    rows = groups * G
    return {"prompt_ids": torch.stack(prompt_ids), "prompt_mask": torch.stack(prompt_mask).long(),
            "completion_ids": torch.arange(rows * 3).reshape(rows, 3),
            "advantages": torch.arange(rows, dtype=torch.float32),
            "labels": [f"row{i}" for i in range(rows)],
            "num_items_in_batch": torch.tensor(17)}


def never(batch):
    raise AssertionError("fell back to the row shuffle")


def test_the_shuffle_moves_whole_groups_and_every_field_with_them():
    from perfgym.train.shared_prefix import shuffle_whole_groups
    batch = generation_batch()
    torch.manual_seed(0)
    orders = set()
    for _ in range(20):
        out = shuffle_whole_groups(batch, 4, never)
        rows = out["advantages"].long().tolist()  # where each row came from
        assert sorted(rows) == list(range(20))
        for start in range(0, 20, 4):  # a block is one group, its rows in order
            assert rows[start:start + 4] == list(range(rows[start], rows[start] + 4))
            assert rows[start] % 4 == 0
        assert out["labels"] == [f"row{i}" for i in rows]
        assert torch.equal(out["completion_ids"], batch["completion_ids"][rows])
        assert torch.equal(out["prompt_ids"], batch["prompt_ids"][rows])
        assert torch.equal(out["prompt_mask"], batch["prompt_mask"][rows])
        assert out["num_items_in_batch"] is batch["num_items_in_batch"]
        orders.add(tuple(rows[::4]))
    assert len(orders) > 5  # a random order of the groups, not a fixed one


@pytest.mark.parametrize("damage", ["two-prompts-in-a-block", "not-a-multiple-of-G",
                                    "no-prompt-ids"])
def test_rows_that_are_not_whole_groups_keep_trls_row_shuffle(damage):
    from perfgym.train.shared_prefix import shuffle_whole_groups
    batch = generation_batch()
    if damage == "two-prompts-in-a-block":  # (rows of a batch split across processes)
        batch = {k: (v[2:22] if isinstance(v, torch.Tensor) and v.ndim else v)
                 for k, v in generation_batch(groups=6).items()}
        batch["labels"] = batch["labels"][:20]
    elif damage == "not-a-multiple-of-G":
        batch = {k: (v[:18] if isinstance(v, (torch.Tensor, list)) and len(v) else v)
                 if not (isinstance(v, torch.Tensor) and v.ndim == 0) else v
                 for k, v in batch.items()}
    else:
        del batch["prompt_ids"]
    called = []
    assert shuffle_whole_groups(batch, 4, lambda b: called.append(b) or "rows") == "rows"
    assert called == [batch]


@pytest.mark.slow
def test_every_micro_batch_of_a_grpo_step_is_one_prompts_group(coder_model, tmp_path,
                                                               monkeypatch):
    """A real GRPO step (TRL's trainer, the tiny coder model, the real evaluator), micro-batches
    of G: every forward of the update sees one prompt, so each prompt is computed once. Before,
    TRL's row shuffle put rows of about three prompts in each. (perfgym's own templates: the
    tiny model's say the same words for every task.)"""
    from perfgym.train import grpo, shared_prefix
    seen = []
    original = shared_prefix.shared_prefix_logps

    def recording(model, input_ids, attention_mask, logits_to_keep, *a, **kw):
        prompts = {tuple(row[mask.bool()].tolist()) for row, mask in
                   zip(input_ids[:, :-logits_to_keep], attention_mask[:, :-logits_to_keep])}
        seen.append((input_ids.size(0), len(prompts)))
        return original(model, input_ids, attention_mask, logits_to_keep, *a, **kw)

    monkeypatch.setattr(shared_prefix, "shared_prefix_logps", recording)
    settings = grpo.GRPOSettings(
        model_path=str(coder_model), task="dgemm,dot,transpose", output_dir=str(tmp_path),
        steps=1, G=4, groups_per_step=3, micro_batch=4, max_completion_length=64,
        gradient_checkpointing=False, save_steps=10,
        eval_overrides={"max_time": 0.2, "max_samples": 10, "min_samples": 3})
    grpo.build(settings).trainer.train()
    assert seen and all(rows == 4 for rows, _ in seen), seen
    assert all(prompts == 1 for _, prompts in seen), seen
    assert len(seen) == 3  # (three prompts, each its own micro-batch)


def test_the_old_policys_log_probabilities_are_zero_where_the_loss_mask_is():
    """Left out of the loss, a position's log-probability is 0 (above); an earlier policy's
    kept there would make the ratio exp(0 - old) overflow where old < -88 (a feedback token
    the model finds unlikely), and inf times the mask's 0 is NaN in the loss."""
    from perfgym.train.shared_prefix import loss_masked
    completion = torch.tensor([[1, 1, 1, 1, 0]])
    tool = torch.tensor([[1, 0, 0, 1, 1]])  # positions 1 and 2: the gym's feedback
    old = torch.tensor([[-1.0, -120.0, -95.0, -2.0, -3.0]])
    mask, inputs = loss_masked({"completion_mask": completion, "tool_mask": tool,
                                "old_per_token_logps": old, "sampling_per_token_logps": None})
    assert mask.tolist() == [[1, 0, 0, 1, 0]]
    assert inputs["old_per_token_logps"].tolist() == [[-1.0, 0.0, 0.0, -2.0, 0.0]]
    assert inputs["sampling_per_token_logps"] is None
    new = torch.zeros(1, 5)  # shared_prefix_logps's 0 where not computed (here everywhere)
    assert torch.isnan((torch.exp(new - old) * mask).sum())  # what it guards against
    ratio = torch.exp(new - inputs["old_per_token_logps"])
    assert torch.isfinite((ratio * mask).sum())
