"""The in-process model runtime: GGUF loading, Qwen2 model, tokenizer, chat template, KV cache."""
