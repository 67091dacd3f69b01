#!/usr/bin/env python3
"""Seed corpus for the GGUF fuzz target (fuzz/gguf.cpp, issue 13): small GGUF
files, written by gguf-py the way llama.cpp's converter writes them, that reach
every stage the target runs (header, metadata of every value type, tensor
table, dequantization, ModelConfig, tokenizer from tokenizer.ggml.*). Kept
under libFuzzer's -max_len (65536) so mutations reach the tensor data too.

  tiny_llama.gguf   llama arch, 1 layer, hidden 32, F32/F16/Q8_0/Q4_0 tensors,
                    a 40-token gpt2 BPE vocabulary with merges and a template
  tiny_qwen3.gguf   qwen3 arch with per-head q/k norms, BF16 and Q4_1 tensors

Usage (a virtualenv from requirements-gguf.txt):
  python tools/reference/make_gguf_fuzz_seeds.py --out tests/data/fuzz/gguf
"""
import argparse
import pathlib

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q

HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM = 32, 64, 2, 1, 16


def vocab():
    # Byte-level symbols for a few letters and their merges, then specials.
    letters = list("abcdehlnorst") + ["\u0120"]
    merges = ["h e", "l l", "o \u0120", "t h", "e r", "a n", "r e", "s t"]
    tokens = letters + [m.replace(" ", "") for m in merges] + ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [1] * (len(tokens) - 3) + [3, 3, 3]
    return tokens, types, merges


def quant(arr, qtype):
    return gguf.quants.quantize(arr.astype(np.float32), qtype), qtype


def add_tensors(w, rng, arch, qtypes):
    n_vocab = len(vocab()[0])
    def t(name, shape, qtype=Q.F32):
        data = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        if qtype == Q.F32:
            w.add_tensor(name, data)
        elif qtype == Q.F16:
            w.add_tensor(name, data.astype(np.float16))
        else:
            q, _ = quant(data, qtype)
            w.add_tensor(name, q, raw_dtype=qtype)
    t("token_embd.weight", (n_vocab, HIDDEN), qtypes[0])
    t("output_norm.weight", (HIDDEN,))
    t("blk.0.attn_norm.weight", (HIDDEN,))
    t("blk.0.ffn_norm.weight", (HIDDEN,))
    t("blk.0.attn_q.weight", (HEADS * HEAD_DIM, HIDDEN), qtypes[1])
    t("blk.0.attn_k.weight", (KV_HEADS * HEAD_DIM, HIDDEN), qtypes[1])
    t("blk.0.attn_v.weight", (KV_HEADS * HEAD_DIM, HIDDEN), qtypes[2])
    t("blk.0.attn_output.weight", (HIDDEN, HEADS * HEAD_DIM), qtypes[2])
    t("blk.0.ffn_gate.weight", (FFN, HIDDEN), qtypes[1])
    t("blk.0.ffn_up.weight", (FFN, HIDDEN), qtypes[1])
    t("blk.0.ffn_down.weight", (HIDDEN, FFN), qtypes[2])
    if arch == "qwen3":
        t("blk.0.attn_q_norm.weight", (HEAD_DIM,))
        t("blk.0.attn_k_norm.weight", (HEAD_DIM,))


def write(path, arch, pre, qtypes, seed):
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(64)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(1)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(1)
    tokens, types, merges = vocab()
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(len(tokens) - 3)
    w.add_eos_token_id(len(tokens) - 1)
    w.add_chat_template("{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
                        "{{ message['content'] }}<|im_end|>\n{% endfor %}")
    add_tensors(w, rng, arch, qtypes)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/fuzz/gguf")
    out = pathlib.Path(ap.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    write(out / "tiny_llama.gguf", "llama", "smollm", (Q.Q8_0, Q.F16, Q.Q4_0), 1)
    write(out / "tiny_qwen3.gguf", "qwen3", "qwen2", (Q.BF16, Q.Q4_1, Q.F32), 2)


if __name__ == "__main__":
    main()
