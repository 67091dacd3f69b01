#!/usr/bin/env bash
# tessera tokenize: ids and text on the real Llama-3 / Qwen3 files (ids checked
# against HF tokenizers 0.23.3), and one exit code per kind of mistake.
set -uo pipefail
bin="$1"; src="$2"
cache="$src/.cache/tokenizers"
fail() { echo "FAIL: $*"; exit 1; }
[ -s "$cache/llama3/tokenizer.json" ] && [ -s "$cache/qwen3/tokenizer.json" ] ||
  fail "$cache/{llama3,qwen3}/tokenizer.json missing: run scripts/fetch-tokenizers"

expect() {  # expect WANT_RC WANT_STDOUT args...
  local want_rc="$1" want_out="$2"; shift 2
  local out rc
  out="$("$bin" "$@" 2>/tmp/tessera_tokenize_err.$$)"; rc=$?
  [ "$rc" = "$want_rc" ] || fail "tessera $* -> exit $rc, want $want_rc ($(cat /tmp/tessera_tokenize_err.$$))"
  [ -z "$want_out" ] || [ "$out" = "$want_out" ] || fail "tessera $* -> '$out', want '$want_out'"
}

# Directory or file path both work.
expect 0 "9906,1917,11,433,596,220,2366,21,0" tokenize -m "$cache/llama3" "Hello world, it's 2026!"
expect 0 "9906,1917,11,433,596,220,2366,21,0" tokenize -m "$cache/llama3/tokenizer.json" "Hello world, it's 2026!"
qwen_text=$'<|im_start|>user\nnaïve café 東京 👍🏽<|im_end|>'
qwen_ids="151644,872,198,3376,37572,586,51950,60596,109,46553,61804,235,145375,151645"
expect 0 "$qwen_ids" tokenize -m "$cache/qwen3" "$qwen_text"
expect 0 "$qwen_text" tokenize -m "$cache/qwen3" --decode "$qwen_ids"
expect 0 $'user\nnaïve café 東京 👍🏽' tokenize -m "$cache/qwen3" --decode "$qwen_ids" --no-special
expect 0 "Hello world" tokenize -m "$cache/llama3" --decode "[9906, 1917]"

# Mistakes: usage (2) versus bad input (3).
expect 2 "" tokenize -m "$cache/llama3"
expect 2 "" tokenize -m "$cache/llama3" --decode "1,two"
expect 2 "" tokenize "no model given"
expect 3 "" tokenize -m "$src/does/not/exist" "text"
bad="$(mktemp -d)"; trap 'rm -rf "$bad" /tmp/tessera_tokenize_err.$$' EXIT
echo '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a zz"]}}' >"$bad/tokenizer.json"
expect 3 "" tokenize -m "$bad" "a"
grep -q "merge 'a zz' names unknown token 'zz'" /tmp/tessera_tokenize_err.$$ ||
  fail "bad merge error does not name the merge: $(cat /tmp/tessera_tokenize_err.$$)"
echo "tokenize.sh: ok"
