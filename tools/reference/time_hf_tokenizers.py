#!/usr/bin/env python3
"""Times HF tokenizers (Rust, via PyPI `tokenizers`) encoding the two ~1 MB texts
bench/tokenizer_bench.cpp uses, single thread, one encode() call per text (no
encode_batch), measuring CPU time (process_time, as Google Benchmark's
bytes_per_second does; the machine may be shared), and prints MB/s (1e6 bytes) and MiB/s (Google Benchmark's
bytes_per_second, printed as "M/s", counts in MiB).

Usage: RAYON_NUM_THREADS=1 /tmp/venv-tok/bin/python tools/reference/time_hf_tokenizers.py
"""
import json
import os
import pathlib
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
import tokenizers  # noqa: E402  (after the thread settings)

ROOT = pathlib.Path(__file__).resolve().parents[2]
TARGET = 1000000


def corpus_text():
    joined = ""
    for line in (ROOT / "tests/data/tokenizer/corpus.jsonl").read_text(encoding="utf-8").split("\n"):
        if line:
            e = json.loads(line)
            if "text" in e:
                joined += e["text"] + "\n"
    out, n = [], 0
    jb = len(joined.encode("utf-8"))
    while n < TARGET:
        out.append(joined)
        n += jb
    return "".join(out)


def random_words_text():
    """Same 31-bit LCG as random_words_text() in bench/tokenizer_bench.cpp."""
    alphabet = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789éüñß中文日本😀")
    seps = [" ", " ", " ", ", ", ".\n", "\t", "  "]
    x = 12345

    def rnd():
        nonlocal x
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        return x >> 16

    out, n = [], 0
    while n < TARGET:
        k = 1 + rnd() % 10
        word = "".join(alphabet[rnd() % len(alphabet)] for _ in range(k)) + seps[rnd() % 7]
        out.append(word)
        n += len(word.encode("utf-8"))
    return "".join(out)


def main():
    texts = {"corpus": corpus_text(), "random_words": random_words_text()}
    print(f"tokenizers {tokenizers.__version__}, RAYON_NUM_THREADS={os.environ['RAYON_NUM_THREADS']}")
    for name in ["llama3", "qwen3", "gpt2"]:
        tok = tokenizers.Tokenizer.from_file(str(ROOT / ".cache/tokenizers" / name / "tokenizer.json"))
        for which, text in texts.items():
            nbytes = len(text.encode("utf-8"))
            tok.encode(text, add_special_tokens=False)  # warm up, like the benchmark's first run
            times = []
            for _ in range(5):
                t0 = time.process_time()
                ids = tok.encode(text, add_special_tokens=False).ids
                times.append(time.process_time() - t0)
            best = min(times)
            print(f"{name:7s} {which:13s} {nbytes} bytes {len(ids)} tokens "
                  f"best {best * 1e3:.1f} ms  {nbytes / best / 1e6:.2f} MB/s  "
                  f"{nbytes / best / 2**20:.2f} MiB/s")


if __name__ == "__main__":
    main()
