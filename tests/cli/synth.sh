#!/usr/bin/env bash
# tessera synth / presets: a complete, deterministic model directory.
# usage: synth.sh <tessera> <source-dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" synth --preset tiny --out "$tmp/a" --seed 5 > "$tmp/out.txt" 2>/dev/null
for f in config.json model.safetensors tokenizer.json generation_config.json; do
  [ -s "$tmp/a/$f" ] || fail "synth did not write $f"
done
grep -q "LlamaForCausalLM" "$tmp/out.txt" || fail "synth summary: $(cat "$tmp/out.txt")"

# Same seed, same bytes; another seed, other weights.
"$bin" synth --preset tiny --out "$tmp/b" --seed 5 > /dev/null 2>&1
"$bin" synth --preset tiny --out "$tmp/c" --seed 6 > /dev/null 2>&1
cmp -s "$tmp/a/model.safetensors" "$tmp/b/model.safetensors" || fail "same seed, different bytes"
cmp -s "$tmp/a/config.json" "$tmp/b/config.json" || fail "same seed, different config"
if cmp -s "$tmp/a/model.safetensors" "$tmp/c/model.safetensors"; then fail "seed ignored"; fi

# --config FILE with --layers reproduces the shapes of the file, fewer layers.
"$bin" synth --config "$tmp/a/config.json" --layers 1 --out "$tmp/d" > /dev/null 2>&1
grep -q '"num_hidden_layers": 1' "$tmp/d/config.json" || fail "--layers not applied"
grep -q '"hidden_size": 128' "$tmp/d/config.json" || fail "--config shapes not kept"

# Every preset is listed with its shape.
"$bin" presets > "$tmp/presets.txt"
[ "$(wc -l < "$tmp/presets.txt")" -eq 13 ] || fail "expected 13 presets: $(cat "$tmp/presets.txt")"
grep -q "^llama-3.2-1b: LlamaForCausalLM layers=16 hidden=2048 .*params=1235814400" \
  "$tmp/presets.txt" || fail "llama-3.2-1b line: $(grep llama-3.2-1b "$tmp/presets.txt")"
grep -q "^qwen3-0.6b: Qwen3ForCausalLM .*heads=16/8 head_dim=128 .*qk_norm" "$tmp/presets.txt" \
  || fail "qwen3-0.6b line"
echo OK
