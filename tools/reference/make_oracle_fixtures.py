#!/usr/bin/env python3
"""Build the transformers reference fixtures that the tessera FP32 oracle is judged by.

For each small random-weight model below this writes tests/data/oracle/<name>/:
  config.json, model.safetensors   (save_pretrained; F32, one model BF16)
  reference.safetensors            F32 tensors computed by transformers itself:
      logits        [T, vocab]  teacher-forced over prompt + greedy continuation
      embed         [T, hidden] token embeddings
      h_out.<l>     [T, hidden] output of decoder layer l (forward hook)
      final_norm    [T, hidden] model.norm output
  reference.json                   prompt ids, greedy ids, versions, margins

The per-layer outputs come from forward hooks on the decoder layers rather than
output_hidden_states, because transformers 4.57 replaces the last entry of
hidden_states by the final-normed state; the hooks give h_out of every layer.

Usage (in a virtualenv made from requirements-oracle.txt):
  python tools/reference/make_oracle_fixtures.py [--out tests/data/oracle] [--only NAME ...]
"""
import argparse
import json
import math
import pathlib
import shutil

import numpy as np
import safetensors
import safetensors.torch
import torch
import transformers
from transformers import (AutoModelForCausalLM, LlamaConfig, MistralConfig, Qwen2Config,
                          Qwen3Config)

GREEDY_TOKENS = 32
# The C++ test allows logits to differ by 1e-4 of the row's range; a greedy
# choice whose top1-top2 gap is 10x that cannot flip within tolerance.
MIN_GAP_OF_RANGE = 1e-3
# Random models fall into repeating one token; a continuation that does so
# checks the KV cache path poorly, so prompts leading there are skipped.
MIN_DISTINCT_TOKENS = 10
PROMPT_TRIES = 200

LLAMA3_SHORT = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
LLAMA3_TINY = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
               "high_freq_factor": 2.0, "original_max_position_embeddings": 32}

# Each entry covers traits named in its description; together: every family, GQA
# and MHA, head_dim 32/64/80/128, tied and untied, llama3 rope scaling on and
# off, Qwen2 qkv bias, Qwen3 qk-norm with head_dim decoupled, one BF16 file.
FIXTURES = [
    dict(name="llama_gqa_rope3_tied", cls=LlamaConfig, dtype="float32", prompt=8,
         desc="Llama GQA 2:1, head_dim 64, tied, llama3 rope scaling",
         config=dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1, head_dim=64,
                     vocab_size=512, tie_word_embeddings=True, rope_theta=10000.0,
                     rope_scaling=LLAMA3_SHORT, rms_norm_eps=1e-5)),
    dict(name="llama_mha_hd128_bf16", cls=LlamaConfig, dtype="bfloat16", prompt=8,
         desc="Llama MHA, head_dim 128 decoupled from hidden 128, untied, BF16 weights",
         config=dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=2, head_dim=128,
                     vocab_size=512, tie_word_embeddings=False, rope_theta=500000.0,
                     rms_norm_eps=1e-5)),
    dict(name="qwen2_bias_hd80_tied", cls=Qwen2Config, dtype="float32", prompt=8,
         desc="Qwen2 with q/k/v bias, GQA 2:1, head_dim 80 (hidden 160 / 2 heads), tied",
         config=dict(hidden_size=160, intermediate_size=192, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1, vocab_size=512,
                     tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6)),
    dict(name="qwen3_qknorm_gqa_tied", cls=Qwen3Config, dtype="float32", prompt=8,
         desc="Qwen3 qk-norm, GQA 2:1, head_dim 64 decoupled (4 x 64 != 128), tied",
         config=dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                     vocab_size=512, tie_word_embeddings=True, rope_theta=1000000.0,
                     rms_norm_eps=1e-6)),
    dict(name="qwen3_mha_hd80_rope3_untied", cls=Qwen3Config, dtype="float32", prompt=8,
         desc="Qwen3 qk-norm, MHA, head_dim 80 decoupled from hidden 96, untied, llama3 rope",
         config=dict(hidden_size=96, intermediate_size=192, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=2, head_dim=80,
                     vocab_size=512, tie_word_embeddings=False, rope_theta=10000.0,
                     rope_scaling=LLAMA3_TINY, rms_norm_eps=1e-6)),
    dict(name="llama_mha_3layer_untied", cls=LlamaConfig, dtype="float32", prompt=16,
         desc="Llama (SmolLM2-like) MHA 3 heads of 32, 3 layers, untied",
         config=dict(hidden_size=96, intermediate_size=192, num_hidden_layers=3,
                     num_attention_heads=3, num_key_value_heads=3, vocab_size=512,
                     tie_word_embeddings=False, rope_theta=100000.0, rms_norm_eps=1e-5)),
    dict(name="mistral_gqa_nowindow_untied", cls=MistralConfig, dtype="float32", prompt=12,
         desc="Mistral (v0.2+ style, sliding_window null), GQA 2:1, head_dim derived 32, untied",
         config=dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
                     tie_word_embeddings=False, rope_theta=1000000.0, rms_norm_eps=1e-5,
                     sliding_window=None)),
]


def randomize(model, tied):
    """Weights with O(1) activations and logits spread wide (std ~10) so greedy
    choices are far from ties; HF's 0.02 init gives near-uniform logits.
    Embeddings are kept small next to the layers' contributions, otherwise a
    tied head keeps predicting the token it just read."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "model.norm.weight":
                # A tied head has rows of norm 0.1 sqrt(hidden): the final norm
                # weight supplies the missing gain.
                p.copy_((9.0 if tied else 1.0) * (1.0 + 0.3 * torch.randn_like(p)))
            elif name.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.2 * torch.randn_like(p))
            elif "embed_tokens" in name:
                p.copy_(0.1 * torch.randn_like(p))
            elif name.startswith("lm_head"):
                p.copy_(torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / math.sqrt(p.shape[1]))


def build(spec, seed):
    cfg = spec["cls"](**spec["config"], max_position_embeddings=1024, bos_token_id=1,
                      eos_token_id=2, dtype=spec["dtype"])
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager",
                                             dtype=torch.float32)
    randomize(model, tied=spec["config"]["tie_word_embeddings"])
    if spec["dtype"] == "bfloat16":  # transformers computes in fp32 on bf16-rounded weights
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return model.eval()


def greedy(model, prompt):
    """Greedy continuation by full re-forward each step: no cache, the plainest
    definition, independent of generate()'s options."""
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(GREEDY_TOKENS):
            logits = model(torch.tensor([ids])).logits[0, -1]
            ids.append(int(torch.argmax(logits)))
    return ids[len(prompt):]


def teacher_forced(model, ids):
    outs = {}
    hooks = []
    for i, layer in enumerate(model.model.layers):
        hooks.append(layer.register_forward_hook(
            lambda _m, _inp, out, i=i: outs.__setitem__(
                f"h_out.{i}", (out[0] if isinstance(out, tuple) else out)[0].clone())))
    hooks.append(model.model.embed_tokens.register_forward_hook(
        lambda _m, _inp, out: outs.__setitem__("embed", out[0].clone())))
    hooks.append(model.model.norm.register_forward_hook(
        lambda _m, _inp, out: outs.__setitem__("final_norm", out[0].clone())))
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    for h in hooks:
        h.remove()
    outs["logits"] = logits.clone()
    return {k: v.to(torch.float32).contiguous() for k, v in outs.items()}


def top2_gap(logits):
    top = torch.topk(logits, 2, dim=-1).values
    return (top[:, 0] - top[:, 1])


def pick_prompt(spec, index, model):
    """First seeded random prompt whose greedy continuation has no near-tie and
    does not collapse into a repeated token."""
    vocab = spec["config"]["vocab_size"]
    for attempt in range(PROMPT_TRIES):
        gen = torch.Generator().manual_seed(77 + index + 1000 * attempt)
        # Ids 0..2 are left out of prompts: they are bos/pad/eos in config.json.
        prompt = torch.randint(3, vocab, (spec["prompt"],), generator=gen).tolist()
        cont = greedy(model, prompt)
        if len(set(cont)) < MIN_DISTINCT_TOKENS:
            continue
        ref = teacher_forced(model, prompt + cont)
        steps = ref["logits"][len(prompt) - 1:-1]
        ranges = steps.max(-1).values - steps.min(-1).values
        if bool((top2_gap(steps) >= MIN_GAP_OF_RANGE * ranges).all()):
            return prompt, cont, ref, attempt
    raise SystemExit(f"{spec['name']}: no prompt without near-ties in {PROMPT_TRIES} tries")


def make_one(spec, index, out_root):
    model = build(spec, seed=1000 + index)
    prompt, cont, ref, attempt = pick_prompt(spec, index, model)
    ids = prompt + cont
    # The teacher-forced pass must pick the same continuation.
    tf = torch.argmax(ref["logits"][len(prompt) - 1:len(ids) - 1], dim=-1).tolist()
    assert tf == cont, f"{spec['name']}: teacher-forced argmax differs from greedy"
    gaps = top2_gap(ref["logits"])
    greedy_gaps = gaps[len(prompt) - 1:len(ids) - 1]
    ranges = ref["logits"].max(-1).values - ref["logits"].min(-1).values
    greedy_rel = greedy_gaps / ranges[len(prompt) - 1:len(ids) - 1]

    out = out_root / spec["name"]
    if out.exists():
        shutil.rmtree(out)
    save_dtype = torch.bfloat16 if spec["dtype"] == "bfloat16" else torch.float32
    model.to(save_dtype).save_pretrained(out, safe_serialization=True)
    model.config.dtype = spec["dtype"]
    model.to(torch.float32)
    (out / "generation_config.json").unlink(missing_ok=True)
    safetensors.torch.save_file(ref, str(out / "reference.safetensors"))

    # The saved directory must reproduce the logits it is shipped with.
    reloaded = AutoModelForCausalLM.from_pretrained(out, attn_implementation="eager",
                                                    dtype=torch.float32).eval()
    with torch.no_grad():
        again = reloaded(torch.tensor([ids])).logits[0]
    assert torch.equal(again, ref["logits"]), f"{spec['name']}: reload changed logits"

    meta = {
        "description": spec["desc"],
        "architecture": model.config.architectures[0],
        "weights_dtype": spec["dtype"],
        "prompt_ids": prompt,
        "greedy_ids": cont,
        "prompt_attempt": attempt,
        "min_top2_gap_greedy": float(greedy_gaps.min()),
        "min_top2_gap_greedy_of_range": float(greedy_rel.min()),
        "min_top2_gap_all": float(gaps.min()),
        "min_logit_range": float(ranges.min()),
        "generator": "tools/reference/make_oracle_fixtures.py",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "safetensors": safetensors.__version__, "numpy": np.__version__},
    }
    (out / "reference.json").write_text(json.dumps(meta, indent=1) + "\n")
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"{spec['name']:30s} {size / 1e6:5.2f} MB  min top1-top2 gap: greedy "
          f"{meta['min_top2_gap_greedy']:.3f} ({meta['min_top2_gap_greedy_of_range']:.4f} of range)"
          f" all {meta['min_top2_gap_all']:.4f}  try {attempt}  "
          f"min logit range {meta['min_logit_range']:.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = pathlib.Path(__file__).resolve().parents[2]
    ap.add_argument("--out", type=pathlib.Path, default=root / "tests" / "data" / "oracle")
    ap.add_argument("--only", nargs="*", default=None,
                    help="write only these fixtures (seeds depend on the index, not on this)")
    args = ap.parse_args()
    torch.set_num_threads(2)
    args.out.mkdir(parents=True, exist_ok=True)
    for i, spec in enumerate(FIXTURES):
        if args.only is None or spec["name"] in args.only:
            make_one(spec, i, args.out)


if __name__ == "__main__":
    main()
