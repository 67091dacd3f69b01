#!/usr/bin/env bash
# tessera chat driven through stdin on a tiny deployment with a ChatML
# template: the second turn keeps the KV cache (starts where the first left it
# and appends only its own tokens), /reset starts over, /quit and end of input
# leave with exit 0, a deployment without a chat template is refused.
# usage: chat.sh <tessera> <source-dir>
set -uo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" synth --preset tiny --out "$tmp/m" --seed 3 > /dev/null 2>&1 || fail "synth"
"$bin" deploy -m "$tmp/m" --out "$tmp/plain" --seq 9 --tokens 4 > /dev/null 2>&1 || fail "deploy (no template)"
cat > "$tmp/m/tokenizer_config.json" << 'JSON'
{"chat_template": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"}
JSON
d="$tmp/dep"
"$bin" deploy -m "$tmp/m" --out "$d" --seq 9 --tokens 4 > /dev/null 2>&1 || fail "deploy"

printf 'tell me a long story about two cats\nhi\n/reset\nhi\n/quit\nnever read\n' |
  "$bin" chat "$d" -n 6 --temperature 0 > "$tmp/out.txt" 2> "$tmp/err.txt" || fail "chat exited $?: $(cat "$tmp/err.txt")"
grep -q "ChatML template" "$tmp/err.txt" || fail "no banner: $(cat "$tmp/err.txt")"
turns=$(grep -c '^\[turn ' "$tmp/err.txt")
[ "$turns" = 3 ] || fail "$turns turns, want 3 (/quit must stop before 'never read'): $(cat "$tmp/err.txt")"
# Three replies, each ended by a newline (a reply may hold newlines of its own).
[ "$(wc -l < "$tmp/out.txt")" -ge 3 ] || fail "want 3 streamed replies on stdout: $(cat "$tmp/out.txt")"
field() {  # field N REGEX: the number REGEX captures on the N-th turn line
  grep '^\[turn ' "$tmp/err.txt" | sed -n "${1}p" | sed -nE "s/.*$2.*/\1/p"
}
p1=$(field 1 ': ([0-9]+) prompt tokens appended'); g1=$(field 1 '; ([0-9]+) generated')
p2=$(field 2 ': ([0-9]+) prompt tokens appended'); x2=$(field 2 'at position ([0-9]+)')
p3=$(field 3 ': ([0-9]+) prompt tokens appended'); x3=$(field 3 'at position ([0-9]+)')
[ -n "$p1" ] && [ -n "$g1" ] && [ -n "$p2" ] && [ -n "$x2" ] && [ -n "$p3" ] || fail "unparsed: $(cat "$tmp/err.txt")"
# Turn 2 starts on turn 1's cache: its prompt and every generated token but
# the last (sampled, never run through decode).
[ "$x2" = $((p1 + g1 - 1)) ] || fail "turn 2 at position $x2, want $((p1 + g1 - 1)) (cache not kept)"
grep '^\[turn ' "$tmp/err.txt" | sed -n 2p | grep -q "prefilled again" && fail "turn 2 prefilled the history again"
# Turn 2 appends 'hi' in its template frame plus the end of turn 1 (its last
# token and <|im_end|>\n): a little more than the same 'hi' from an empty
# cache (turn 3, after /reset), far less than the history.
[ "$x3" = 0 ] || fail "after /reset the turn starts at $x3, want 0"
[ "$p2" -gt "$p3" ] && [ "$p2" -le $((p3 + 24)) ] || fail "turn 2 appended $p2 tokens; a fresh 'hi' is $p3"
[ "$p2" -lt "$x2" ] || fail "turn 2 appended $p2 >= the $x2 tokens of history"

# End of input without /quit leaves cleanly too.
printf 'hi\n' | "$bin" chat "$d" -n 2 > /dev/null 2> "$tmp/eof.err" || fail "EOF: exit $?"
grep -c '^\[turn ' "$tmp/eof.err" | grep -qx 1 || fail "EOF run: $(cat "$tmp/eof.err")"

# The template is a recorded artifact: a changed source template redoes phase 0
# (the deployment's copy follows it), and a hand-edited copy is refused.
sed -i 's/<|im_start|>assistant/<|im_start|>assistant /' "$tmp/m/tokenizer_config.json"
"$bin" deploy -m "$tmp/m" --out "$d" --seq 9 --tokens 4 > "$tmp/redo.txt" 2> /dev/null || fail "redeploy exited $?"
grep -q "^phase 0 oracle *passed" "$tmp/redo.txt" || fail "phase 0 not redone for a changed template: $(cat "$tmp/redo.txt")"
cmp -s "$tmp/m/tokenizer_config.json" "$d/model/tokenizer_config.json" || fail "the deployment kept the old template"
echo ' ' >> "$d/model/tokenizer_config.json"
printf 'hi\n' | "$bin" chat "$d" > /dev/null 2> "$tmp/t.err"; rc=$?
[ "$rc" = 3 ] && grep -q "model/tokenizer_config.json" "$tmp/t.err" || fail "edited template: exit $rc: $(cat "$tmp/t.err")"

# No chat template: one line, bad input.
printf 'hi\n' | "$bin" chat "$tmp/plain" > /dev/null 2> "$tmp/x.err"; rc=$?
[ "$rc" = 3 ] || fail "chat without a template exited $rc, want 3: $(cat "$tmp/x.err")"
grep -q "tokenizer_config.json" "$tmp/x.err" || fail "$(cat "$tmp/x.err")"
echo "chat.sh: ok"
