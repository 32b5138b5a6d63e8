"""A tiny, randomly initialised causal LM with a tokenizer trained here: the real transformers
code path, no network, built in seconds. Used by tests and by `--smoke` recipes."""
from pathlib import Path

CORPUS = [
    "void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {",
    "for (int i = 0; i < M; i++) for (int j = 0; j < N; j++) { double s = 0.0; }",
    "#pragma omp parallel for collapse(2) schedule(static)",
    "__m512d a = _mm512_loadu_pd(&A[i * K + k]); c = _mm512_fmadd_pd(a, b, c);",
    "Write a fast C kernel for the following task. Answer with the code in one block.",
    "```c\nvoid f(void) {}\n```", "Make this C kernel faster. Fix this C kernel.",
]


def build_tiny_model(path: Path, hidden: int = 32) -> Path:
    if (path / "config.json").is_file():
        return path
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 20, trainer)
    from tokenizers import decoders
    tok.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                        unk_token="<unk>", pad_token="<pad>")
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden,
                         intermediate_size=2 * hidden,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=4096, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    model = LlamaForCausalLM(config)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def build_coder_model(root: Path, templates: Path, steps: int = 300) -> Path:
    """A hidden-128 tiny model taught, through perfgym's own SFT, to answer each short prompt in
    `templates` (generate/improve/deepen/repair.txt) with one of two real dgemm kernels (naive,
    ~2.5 GFLOP/s; i-k-j, ~15 GFLOP/s), so GRPO on it sees rewards that differ within a group."""
    import json

    from ..extract import normalize
    from ..tasks import get_task
    from . import sft
    from .pairs import VARIANTS_DIR
    final = root / "sft" / "final"
    if (final / "config.json").is_file():
        return final
    base = build_tiny_model(root / "base", hidden=128)
    naive = normalize(get_task("dgemm").baseline.read_text()) + "\n"  # no comments: shorter
    ikj = normalize((VARIANTS_DIR / "dgemm__ikj_loop_order.c").read_text()) + "\n"
    rows = [{"prompt": (templates / f"{op}.txt").read_text() + "\n",
             "completion": f"```c\n{code}```"}
            for op in ("generate", "improve", "deepen", "repair") for code in (naive, ikj)]
    data = root / "sft.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows * 4))
    sft.train(sft.SFTSettings(model_path=str(base), pairs=str(data), output_dir=str(root / "sft"),
                              lora=False, learning_rate=3e-3, batch_size=8, max_steps=steps,
                              warmup_steps=0, max_length=512))
    return final
