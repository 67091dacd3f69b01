#!/usr/bin/env python3
"""Reference outputs of transformers on the default real model, SmolLM2-135M-
Instruct Q4_1 GGUF (scripts/fetch-models), for tests/oracle/smollm2_gguf_slow_test.cpp.

transformers loads the GGUF itself (dequantizing with gguf-py, reversing the
llama q/k permutation) and runs in FP32 on the CPU. For each prompt this writes
  smollm2_reference.safetensors  last_logits [P, vocab] F32: logits at the last
                                 prompt position
  smollm2_reference.json         prompt text and ids (transformers' GGUF
                                 tokenizer), GREEDY greedy ids, the top1-top2
                                 gap of every greedy step, versions

Prompts contain no digit runs: transformers' GGUF tokenizer ignores
tokenizer.ggml.pre and so does not split digits as SmolLM2's tokenizer.json
(and llama.cpp, and tessera) do; elsewhere the two encode identically.

Usage (in a virtualenv made from requirements-oracle.txt plus gguf==0.19.0):
  python tools/reference/make_smollm2_fixtures.py [--model models/...gguf]
"""
import argparse
import json
import pathlib

import gguf  # noqa: F401  (transformers' GGUF loader needs it)
import numpy as np
import safetensors.numpy
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

GREEDY = 16
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
CHAT = ["What is the capital of France?", "Write a short poem about the sea.",
        "Explain gravity to a child in one sentence."]
PLAIN = ["The quick brown fox jumps over the lazy dog. The dog"]


def chatml(question):
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n"
            "<|im_start|>assistant\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--out", default="tests/data/gguf")
    a = ap.parse_args()
    path = pathlib.Path(a.model)
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                 torch_dtype=torch.float32)
    model.eval()
    entries, last = [], []
    for text in [chatml(q) for q in CHAT] + PLAIN:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        seq = list(ids)
        gaps = []
        with torch.no_grad():
            for step in range(GREEDY):
                logits = model(torch.tensor([seq])).logits[0, -1].float()
                if step == 0:
                    last.append(logits.numpy().copy())
                top = torch.topk(logits, 2).values
                gaps.append(float(top[0] - top[1]))
                nxt = int(torch.argmax(logits))
                seq.append(nxt)
        entries.append({"text": text, "prompt_ids": ids, "greedy_ids": seq[len(ids):],
                        "top2_gaps": gaps,
                        "greedy_text": tok.decode(seq[len(ids):])})
        print(repr(entries[-1]["greedy_text"]), f"min gap {min(gaps):.4f}")
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    safetensors.numpy.save_file({"last_logits": np.stack(last).astype(np.float32)},
                                str(out / "smollm2_reference.safetensors"))
    meta = {"model": path.name, "dtype": "float32", "greedy_tokens": GREEDY,
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "gguf": "0.19.0", "numpy": np.__version__},
            "prompts": entries}
    (out / "smollm2_reference.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
