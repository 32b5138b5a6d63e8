"""Training that learns from the gym: online GRPO (TRL) and SFT with LoRA on slow/fast pairs.
Needs the `train` extra (torch, transformers, trl, peft)."""
