#!/usr/bin/env bash
# tessera inspect: architecture, traits, shapes, parameters, bytes, tokenizer.
# usage: inspect.sh <tessera> <source-dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" synth --preset tiny-qwen3 --out "$tmp/m" --seed 1 > /dev/null 2>&1
"$bin" inspect "$tmp/m" > "$tmp/out.txt"
expect() { grep -q -- "$1" "$tmp/out.txt" || fail "inspect output lacks '$1':
$(cat "$tmp/out.txt")"; }
expect "architecture: Qwen3ForCausalLM (family qwen3)"
expect "qkv_bias=false qk_norm=true tied_embeddings=false"
expect "heads=4 kv_heads=2 (group 2) head_dim=64 q_dim=256"
expect "parameters:   623,488 in 25 tensors"
expect "bytes BF16    1,246,976"
expect "q_norm       \[64\]"
expect "lm_head      \[512, 128\]"
expect "tokenizer:    BPE vocab=510 merges=254 added=2"
expect "<|begin_of_text|>=510"

expect "attention:    full causal (no sliding window)"

# Mistral: sliding_window null is the Llama block; a window as long as the
# context cannot bind and inspect says so; a window that could bind is refused
# with exit 3 and names the window.
# tiny's tensors are the ones a Mistral of that shape has.
"$bin" synth --preset tiny --out "$tmp/mis" --seed 1 > /dev/null 2>&1
sed -i -e 's/"LlamaForCausalLM"/"MistralForCausalLM"/' -e 's/^{/{"sliding_window": 2048,/' \
    "$tmp/mis/config.json"
"$bin" inspect "$tmp/mis" > "$tmp/out.txt" 2>&1 || true
expect "architecture: MistralForCausalLM (family mistral)"
expect "sliding_window=2048 >= context 2048: cannot bind"
sed -i 's/"sliding_window": 2048/"sliding_window": 512/' "$tmp/mis/config.json"
set +e
"$bin" inspect "$tmp/mis" > "$tmp/out.txt" 2>&1
rc=$?
set -e
[ "$rc" = 3 ] || fail "binding sliding window: exit $rc, want 3: $(cat "$tmp/out.txt")"
expect "sliding_window 512 is shorter than the context 2048"

# A model without tokenizer.json still inspects.
rm "$tmp/m/tokenizer.json"
"$bin" inspect "$tmp/m" | grep -q "tokenizer:    none" || fail "missing tokenizer not reported"
echo OK
