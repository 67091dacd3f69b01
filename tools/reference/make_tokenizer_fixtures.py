#!/usr/bin/env python3
"""Writes the reference ids tessera's tokenizer must reproduce.

For each real tokenizer.json in .cache/tokenizers/<name>/ (scripts/fetch-tokenizers)
and each variant in tests/data/tokenizer/variants.json (a JSON merge patch of one
of them, so odd options get covered without committing multi-MB files), encodes
every corpus entry with HF `tokenizers` with and without special tokens, and
decodes the ids with and without skip_special_tokens.

Corpus entries with "hex" are raw bytes that are not valid UTF-8. HF's binding
only takes str: bytes decoded with errors="surrogateescape" make it raise, so
the reference is the errors="replace" decoding (one U+FFFD per maximal invalid
subsequence), which is what tessera does to such input.

Usage: /tmp/venv-tok/bin/python tools/reference/make_tokenizer_fixtures.py
"""
import copy
import json
import pathlib

import tokenizers

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "tokenizer"
CACHE = ROOT / ".cache" / "tokenizers"
BASES = ["llama3", "qwen3", "gpt2"]


def merge_patch(target, patch):
    """RFC 7386, the same operation as nlohmann::json::merge_patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def corpus():
    # split("\n"), not splitlines(): entries hold U+0085 and U+2028 literally.
    for line in (DATA / "corpus.jsonl").read_text(encoding="utf-8").split("\n"):
        if not line:
            continue
        entry = json.loads(line)
        if "hex" in entry:
            raw = bytes.fromhex(entry["hex"])
            try:
                raw.decode("utf-8", errors="surrogateescape").encode("utf-8")
                raise SystemExit(f"{entry['name']}: expected invalid UTF-8")
            except UnicodeEncodeError:
                pass  # what HF's binding would hit; see the docstring
            yield entry["name"], raw.decode("utf-8", errors="replace")
        else:
            yield entry["name"], entry["text"]


def reference(tok_json, name):
    tok = tokenizers.Tokenizer.from_str(json.dumps(tok_json))
    cases = []
    for case, text in corpus():
        ids = tok.encode(text, add_special_tokens=True).ids
        cases.append({
            "name": case,
            "ids": ids,
            "ids_no_special": tok.encode(text, add_special_tokens=False).ids,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
        })
    out = {"tokenizer": name, "tokenizers_version": tokenizers.__version__,
           "vocab_size": tok.get_vocab_size(with_added_tokens=True), "cases": cases}
    path = DATA / f"reference_{name}.json"
    path.write_text(json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n",
                    encoding="utf-8")
    print(f"{path.relative_to(ROOT)}: {len(cases)} cases")


def main():
    bases = {}
    for name in BASES:
        path = CACHE / name / "tokenizer.json"
        if not path.exists():
            raise SystemExit(f"{path} missing: run scripts/fetch-tokenizers")
        bases[name] = json.loads(path.read_text(encoding="utf-8"))
        reference(bases[name], name)
    for v in json.loads((DATA / "variants.json").read_text(encoding="utf-8")):
        tj = merge_patch(bases[v["base"]], v.get("patch", {}))
        tj["added_tokens"] = tj.get("added_tokens", []) + v.get("append_added_tokens", [])
        reference(tj, v["name"])


if __name__ == "__main__":
    main()
