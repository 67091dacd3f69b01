#!/usr/bin/env bash
# -m FILE.gguf wherever -m DIR works, on the tiny committed GGUF fixtures
# (tests/data/gguf/, llama.cpp layout): inspect, tokenize, generate, convert,
# and malformed GGUF files exiting 3 with one line naming the file.
# usage: gguf.sh <tessera> <source-dir>
set -uo pipefail
bin="$1"
src="$2"
g="$src/tests/data/gguf/llama_gqa.gguf"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" inspect "$g" > "$tmp/i.txt" || fail "inspect exited $?"
grep -q "^gguf: *v3 alignment=32 .* F16 x15" "$tmp/i.txt" || fail "gguf line: $(cat "$tmp/i.txt")"
grep -q "heads=2 kv_heads=1" "$tmp/i.txt" || fail "config from metadata: $(cat "$tmp/i.txt")"

ids="$("$bin" tokenize -m "$g" "Once upon a time")" || fail "tokenize exited $?"
[ "${ids%%,*}" = 510 ] || fail "add_bos_token not honoured: $ids"
[ "$("$bin" tokenize -m "$g" --decode "$ids" --no-special)" = "Once upon a time" ] || fail "round trip"

"$bin" generate -m "$g" -p "Once upon a time" -n 4 --print-ids > "$tmp/gen.txt" 2> "$tmp/gen.err" ||
  fail "generate exited $?: $(cat "$tmp/gen.err")"
grep -q "^ids: [0-9]*,[0-9]*,[0-9]*,[0-9]*$" "$tmp/gen.err" || fail "4 ids: $(cat "$tmp/gen.err")"

"$bin" convert "$g" --out "$tmp/hf" > /dev/null || fail "convert exited $?"
"$bin" generate -m "$tmp/hf" -p "Once upon a time" -n 4 --print-ids > /dev/null 2> "$tmp/gen2.err" ||
  fail "generate on the converted directory exited $?"

head -c 100 "$g" > "$tmp/cut.gguf"
"$bin" inspect "$tmp/cut.gguf" > /dev/null 2> "$tmp/err.txt"
rc=$?
[ "$rc" = 3 ] || fail "truncated GGUF exited $rc, want 3"
grep -q "^tessera: error: .*cut.gguf: metadata count 21 cannot fit" "$tmp/err.txt" ||
  fail "error line: $(cat "$tmp/err.txt")"
[ "$(grep -c . "$tmp/err.txt")" = 1 ] || fail "more than one error line: $(cat "$tmp/err.txt")"
"$bin" convert "$src/tests/data/gguf/../oracle/llama_gqa_rope3_tied/config.json" --out "$tmp/x" \
  > /dev/null 2>&1
[ "$?" = 3 ] || fail "convert of a non-GGUF file should exit 3"
echo ok
