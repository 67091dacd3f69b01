#!/usr/bin/env bash
# The default real model, SmolLM2-135M-Instruct Q4_1 GGUF (scripts/fetch-models):
# its config as the GGUF states it, the tokenizer round-tripping text, greedy
# generation answering a ChatML question correctly, and `tessera convert`
# producing an HF directory that loads and answers the same.
# Skipped (exit 77) when the model was not fetched.
# usage: smollm2_gguf_slow.sh <tessera> <source-dir>
set -uo pipefail
bin="$1"
src="$2"
gguf="$src/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -s "$gguf" ]; then
  echo "SKIP: $gguf is absent; run scripts/fetch-models (scripts/setup does)"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" inspect "$gguf" > "$tmp/inspect.txt" || fail "inspect exited $?"
for want in "layers=30 hidden=576 intermediate=1536 heads=9 kv_heads=3" "vocab=49152" \
            "tied_embeddings=true" "rope_theta=100000 rms_norm_eps=1e-05 max_position_embeddings=8192" \
            "bos=\[1\] eos=\[2\]" "Q4_1 x210" "Q8_0 x1" "48900 merges" \
            "chat: *ChatML (default system"; do
  grep -q "$want" "$tmp/inspect.txt" || fail "inspect lacks '$want': $(cat "$tmp/inspect.txt")"
done

for text in "Hello world" "The year 2024 had 366 days." $'tabs\tand\nnewlines  ' \
            "naïve café — 東京 🙂" "<|im_start|>user"; do
  ids="$("$bin" tokenize -m "$gguf" "$text")" || fail "tokenize '$text' exited $?"
  back="$("$bin" tokenize -m "$gguf" --decode "$ids"; echo x)"
  [ "${back%$'\n'x}" = "$text" ] || fail "round trip of '$text' gave '${back%$'\n'x}' (ids $ids)"
done
# Digits are split one by one (tokenizer.ggml.pre = smollm), specials are single tokens.
[ "$("$bin" tokenize -m "$gguf" "2024")" = "34,32,34,36" ] || fail "digits not split individually"
[ "$("$bin" tokenize -m "$gguf" "<|im_start|>user")" = "1,4093" ] || fail "<|im_start|> not one token"

prompt=$'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n'
"$bin" generate -m "$gguf" -p "$prompt" -n 24 > "$tmp/gen.txt" 2> "$tmp/gen.err" ||
  fail "generate exited $?: $(cat "$tmp/gen.err")"
grep -q "Paris" "$tmp/gen.txt" || fail "greedy answer does not name Paris: $(cat "$tmp/gen.txt")"
# --chat renders the same prompt from the GGUF's own chat template.
"$bin" generate -m "$gguf" --chat -p "What is the capital of France?" -n 24 --print-ids \
  > "$tmp/chat.txt" 2> "$tmp/chat.err" || fail "generate --chat exited $?"
cmp -s "$tmp/gen.txt" "$tmp/chat.txt" || fail "--chat answer differs: $(cat "$tmp/chat.txt")"

"$bin" convert "$gguf" --out "$tmp/hf" > "$tmp/convert.txt" || fail "convert exited $?"
for f in config.json tokenizer.json tokenizer_config.json model.safetensors; do
  [ -s "$tmp/hf/$f" ] || fail "convert wrote no $f"
done
grep -q '"chat_template"' "$tmp/hf/tokenizer_config.json" || fail "chat template not kept"
[ "$("$bin" tokenize -m "$tmp/hf" "The year 2024")" = "$("$bin" tokenize -m "$gguf" "The year 2024")" ] ||
  fail "converted tokenizer.json encodes differently"
"$bin" generate -m "$tmp/hf" -p "$prompt" -n 24 > "$tmp/gen2.txt" 2>/dev/null || fail "generate on the converted dir"
grep -q "Paris" "$tmp/gen2.txt" || fail "converted (bf16) model does not name Paris: $(cat "$tmp/gen2.txt")"
# deploy -m FILE.gguf: two layers keep this quick; the full depth is scripts/demo.
"$bin" deploy -m "$gguf" --out "$tmp/dep" --layers 2 --seq 8 --tokens 4 > "$tmp/dep.txt" 2>/dev/null ||
  fail "deploy of the GGUF exited $?: $(cat "$tmp/dep.txt")"
grep -q "^PASS: SmolLM2-135M-Instruct.Q4_1 deployed" "$tmp/dep.txt" || fail "deploy: $(cat "$tmp/dep.txt")"
[ -s "$tmp/dep/gguf/SmolLM2-135M-Instruct.Q4_1/tokenizer_config.json" ] || fail "no converted source"
echo "ok: $(cat "$tmp/gen.txt")"
