"""The fast CPU engine (OpenVINO GenAI) on the real default model: it writes the model's own
weights as a GGUF exactly, its greedy answers are transformers' token for token, it follows new
weights after an update, and as a policy it returns n answers per prompt in order."""
from __future__ import annotations

import pytest

pytest.importorskip("transformers", reason="the local extra is not installed: "
                    "pip install 'perfgym[local]'")
pytest.importorskip("openvino_genai", reason="the fast engine is not installed: "
                    "pip install 'perfgym[local]'")
pytestmark = pytest.mark.slow

PROMPTS = ["Write a C function that sums an array of doubles.",
           "Write a fast dgemm in C with OpenMP.",
           "Transpose a matrix of doubles in C."]
TOKENS = 48


@pytest.fixture(scope="module")
def default():
    """(the default model in transformers, its tokenizer, its shipped GGUF)."""
    from perfgym.models import resolve_model, shipped_gguf
    from perfgym.policies.hf import load_model
    model, tokenizer = load_model(resolve_model(None))
    model.eval()
    return model, tokenizer, shipped_gguf()


def prompt_ids(tokenizer, prompt: str) -> list[int]:
    text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                         add_generation_prompt=True)
    return tokenizer(text)["input_ids"]


def transformers_greedy(model, ids: list[int]) -> list[int]:
    import torch
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids),
                             dtype=torch.long), max_new_tokens=TOKENS, do_sample=False)
    return out[0, len(ids):].tolist()


def engine_greedy(engine, tokenizer, ids: list[int]) -> list[int]:
    (sample,), = engine.generate([ids], 1, max_tokens=TOKENS, temperature=0,
                                 eos_ids=(tokenizer.eos_token_id,))
    return sample.ids


def test_the_written_gguf_holds_the_models_own_weights(default):
    from perfgym.engine.gguf_write import check_mapping
    model, _, gguf = default
    # the default model was converted from this GGUF: laid out again, every tensor is the same
    assert check_mapping(model.state_dict(), gguf) == 0.0


def test_greedy_answers_agree_with_transformers_token_for_token(default, tmp_path):
    from perfgym.engine.openvino import OpenVINOEngine
    model, tokenizer, gguf = default
    engine = OpenVINOEngine(gguf)
    engine.load_weights(model.state_dict(), gguf)
    for prompt in PROMPTS:
        ids = prompt_ids(tokenizer, prompt)
        assert engine_greedy(engine, tokenizer, ids) == transformers_greedy(model, ids), prompt
    engine.close()


def test_the_engine_follows_the_weights_after_an_update(default):
    """A change the test makes and can see: the engine's greedy answer moves with it, to the
    answer transformers gives with the same new weights."""
    import copy

    import torch

    from perfgym.engine.openvino import OpenVINOEngine
    model, tokenizer, gguf = default
    engine = OpenVINOEngine(gguf)
    engine.load_weights(model.state_dict(), gguf)
    ids = prompt_ids(tokenizer, PROMPTS[0])
    before = engine_greedy(engine, tokenizer, ids)
    updated = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # an "update": every attention output projection moves a little
        for layer in updated.model.layers:
            w = layer.self_attn.o_proj.weight
            w.add_(0.02 * torch.randn(w.shape, generator=generator))
    engine.load_weights(updated.state_dict(), gguf)
    after = engine_greedy(engine, tokenizer, ids)
    assert after != before
    assert after == transformers_greedy(updated, ids)
    engine.close()


def test_the_policy_gives_n_answers_per_prompt_in_order():
    from perfgym.policies import make_policy
    policy = make_policy("openvino")
    out = policy.generate(["Write only the word yes.", "Write a C loop that adds 1 to x[i]."],
                          3, temperature=0.7, top_p=0.95, max_tokens=24)
    assert [len(group) for group in out] == [3, 3]
    assert all(isinstance(text, str) and text for group in out for text in group)
    assert len(set(out[1])) > 1  # sampled, not one answer repeated


def test_sampling_reports_a_log_probability_per_generated_token(default):
    from perfgym.engine.openvino import OpenVINOEngine
    _, tokenizer, gguf = default
    engine = OpenVINOEngine(gguf)
    (group,) = engine.generate([prompt_ids(tokenizer, PROMPTS[1])], 2, max_tokens=16,
                               temperature=0.7, top_p=0.95, seed=1)
    for sample in group:
        assert len(sample.logprobs) == len(sample.ids) and all(lp <= 0 for lp in sample.logprobs)
    engine.close()


def test_a_generation_the_engine_stops_moving_ends_at_its_step_limit(default, monkeypatch):
    # the limit brought down to 6 steps (a prefill and a few tokens): past it the requests
    # still running are stopped where they are, their answers cut short and said so, with a
    # warning, and the engine serves the next call in full
    from perfgym.engine import openvino
    _, tokenizer, gguf = default
    engine = openvino.OpenVINOEngine(gguf)
    ids = [prompt_ids(tokenizer, p) for p in PROMPTS[:2]]
    monkeypatch.setattr(openvino, "step_limit", lambda *_: 6)
    with pytest.warns(RuntimeWarning, match="no progress in 6 steps"):
        groups = engine.generate(ids, 2, max_tokens=200, temperature=0.7, seed=3, ignore_eos=True)
    samples = [s for group in groups for s in group]
    assert len(samples) == 4 and all(s.finish == "length" for s in samples)
    assert all(0 < len(s.ids) < 10 for s in samples), [len(s.ids) for s in samples]
    monkeypatch.undo()
    (group,) = engine.generate(ids[:1], 1, max_tokens=20, temperature=0.7, seed=3,
                               ignore_eos=True)
    assert len(group[0].ids) == 20
    engine.close()


OPEN_PROMPT = "Make this C kernel faster.\nvoid dot_optimized(double *x, double *y, double *out, " \
              "int N) { double s = 0; for (int i = 0; i < N; i++) s += x[i] * y[i]; out[0] = s; }"


def test_an_opened_answer_reaches_the_model_in_both_local_policies():
    # greedy, the engine and transformers continue the same opened text the same way; the
    # opening changes what the model writes (it writes a body, not an answer from scratch)
    from perfgym.opening import answer_start
    from perfgym.policies.hf import HFPolicy
    from perfgym.policies.openvino import OpenVINOPolicy
    from perfgym.tasks import get_task
    opening = answer_start(get_task("dot"))
    engine, hf = OpenVINOPolicy(), HFPolicy()
    assert engine.format("p", opening).endswith(opening)
    (fast,), = engine.generate([OPEN_PROMPT], 1, openings=[opening], temperature=0,
                               max_tokens=60)
    (slow,), = hf.generate([OPEN_PROMPT], 1, openings=[opening], temperature=0, max_tokens=60)
    (whole,), = engine.generate([OPEN_PROMPT], 1, temperature=0, max_tokens=60)
    assert fast == slow
    assert fast != whole[:len(fast)]
    assert ";" in fast  # a body with statements, ended at the entry's brace when it closed
    assert fast.endswith("\n}") or len(fast) > 40


def test_a_grammar_constrained_answer_always_extracts():
    # the body grammar keeps braces balanced, admits no preprocessor line but #pragma and ends
    # at the entry's brace: every answer that ended (rather than ran into the token limit,
    # which no grammar can prevent) extracts, and none holds a #define or #include
    from perfgym.extract import extract_code
    from perfgym.opening import answer_start, full_answer
    from perfgym.policies.openvino import OpenVINOPolicy
    from perfgym.tasks import get_task
    task = get_task("dot")
    opening = answer_start(task)
    policy = OpenVINOPolicy()
    (answers,) = policy.generate([OPEN_PROMPT], 6, openings=[opening], temperature=0.7,
                                 top_p=1.0, max_tokens=200, grammar=True)
    ended = [t for t in answers if t.endswith("}")]
    assert ended, answers
    for text in answers:
        assert "#define" not in text and "#include" not in text, text
    for text in ended:
        assert text.count("{") + 1 == text.count("}"), text  # the entry's brace closes it
        if ";" in text:
            extract_code(full_answer(opening, text), task.signature)
