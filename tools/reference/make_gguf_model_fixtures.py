#!/usr/bin/env python3
"""Tiny GGUF models for tests/model/gguf_model_test.cpp, written the way
llama.cpp's convert_hf_to_gguf.py writes them, from two oracle fixture models
(tests/data/oracle/<name>/: config.json + model.safetensors):

  llama_gqa_rope3_tied   -> tests/data/gguf/llama_gqa.gguf   (q/k rows permuted)
  qwen3_qknorm_gqa_tied  -> tests/data/gguf/qwen3_qknorm.gguf (no permutation)
  qwen2_bias_hd80_tied   -> tests/data/gguf/qwen2_bias.gguf   (q/k/v biases)

2-D weights are stored F16 (norms F32, as real files do); the test compares
tessera's GGUF loader with the safetensors weights rounded to F16. Each file
also carries a small gpt2-BPE tokenizer (the tokenizer.json given with
--tokenizer, e.g. from `tessera synth --preset tiny`) so the tokenizer built
from tokenizer.ggml.* can be compared with the tokenizer.json it came from.

Usage (in a virtualenv made from requirements-gguf.txt):
  python tools/reference/make_gguf_model_fixtures.py --tokenizer DIR/tokenizer.json
"""
import argparse
import json
import pathlib

import gguf
import numpy as np
from gguf import GGUFValueType as V

FIXTURES = {"llama_gqa_rope3_tied": "llama_gqa", "qwen3_qknorm_gqa_tied": "qwen3_qknorm",
            "qwen2_bias_hd80_tied": "qwen2_bias"}
ARCH = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}
NAMES = {
    "model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight", "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias", "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
}


def permute(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute: rotary pairs (i, i + d/2) of
    each head become adjacent rows (2i, 2i + 1)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_name(hf):
    if hf in NAMES:
        return NAMES[hf]
    parts = hf.split(".")  # model.layers.N.rest
    return f"blk.{parts[2]}." + NAMES[".".join(parts[3:])]


def add_tokenizer(w, tok):
    vocab = tok["model"]["vocab"]
    size = max([*vocab.values(), *(a["id"] for a in tok["added_tokens"])]) + 1
    tokens = [None] * size
    for t, i in vocab.items():
        tokens[i] = t
    types = [1] * len(tokens)
    for a in tok["added_tokens"]:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = 3 if a["special"] else 4
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "gpt2")
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.token_type", types)
    w.add_array("tokenizer.ggml.merges", merges)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_string("tokenizer.chat_template", "{{ messages }}")


def convert(src, out, tok):
    cfg = json.loads((src / "config.json").read_text())
    arch = ARCH[cfg["architectures"][0]]
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    w = gguf.GGUFWriter(str(out), arch=arch)
    w.add_uint32(f"{arch}.block_count", cfg["num_hidden_layers"])
    w.add_uint32(f"{arch}.context_length", cfg["max_position_embeddings"])
    w.add_uint32(f"{arch}.embedding_length", cfg["hidden_size"])
    w.add_uint32(f"{arch}.feed_forward_length", cfg["intermediate_size"])
    w.add_uint32(f"{arch}.attention.head_count", heads)
    w.add_uint32(f"{arch}.attention.head_count_kv", kv)
    w.add_uint32(f"{arch}.attention.key_length", head_dim)
    w.add_uint32(f"{arch}.attention.value_length", head_dim)
    w.add_uint32(f"{arch}.rope.dimension_count", head_dim)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"])
    w.add_float32(f"{arch}.rope.freq_base", cfg["rope_theta"])
    # The tokenizer's own specials (the synthetic one puts BOS, EOS last).
    specials = [a["id"] for a in tok["added_tokens"] if a["special"]]
    w.add_uint32("tokenizer.ggml.bos_token_id", specials[0])
    w.add_uint32("tokenizer.ggml.eos_token_id", specials[-1])
    add_tokenizer(w, tok)
    from safetensors.numpy import load_file
    tensors = load_file(str(src / "model.safetensors"))
    for name, t in tensors.items():
        if name == "lm_head.weight" and cfg.get("tie_word_embeddings"):
            continue
        t = t.astype(np.float32)
        if arch == "llama" and name.endswith("q_proj.weight"):
            t = permute(t, heads)
        elif arch == "llama" and name.endswith("k_proj.weight"):
            t = permute(t, kv)
        w.add_tensor(gguf_name(name), t.astype(np.float16) if t.ndim == 2 else t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {out} ({out.stat().st_size} bytes)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--data", default="tests/data")
    a = ap.parse_args()
    tok = json.loads(pathlib.Path(a.tokenizer).read_text())
    data = pathlib.Path(a.data)
    for src, dst in FIXTURES.items():
        convert(data / "oracle" / src, data / "gguf" / f"{dst}.gguf", tok)


if __name__ == "__main__":
    main()
