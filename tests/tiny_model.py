"""A tiny, randomly initialised causal LM with a tokenizer trained here: the real transformers
code path, no network, built in a couple of seconds."""
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
