#!/usr/bin/env bash
# skills/ cannot drift from the CLI: every `tessera ...` command a SKILL.md
# cites (in a code block or inline code) must name an existing subcommand
# (its --help runs) and only options that subcommand's --help lists. Also each
# SKILL.md has frontmatter with name and description. The checker itself is shown to fail
# on a planted unknown subcommand and a planted unknown option.
# usage: skills.sh <tessera> <source-dir>
set -euo pipefail
bin="$1"
src="$2"
fail() { echo "FAIL: $*" >&2; exit 1; }

# Prints why `cmd` does not match the CLI; nothing when it does.
lists_sub() { grep -qE "^ +$2( |$)" <<< "$(sed -n '/^Subcommands:/,$p' <<< "$1")"; }

check_cmd() {
  local -a toks
  read -r -a toks <<< "$1"
  local -a path=("${toks[1]}")
  local help
  lists_sub "$top_help" "${toks[1]}" || { echo "no subcommand '${toks[1]}'"; return; }
  help="$("$bin" "${path[@]}" --help 2>&1)" || { echo "'tessera ${toks[1]} --help' failed"; return; }
  # A nested subcommand (gate kernels, synth presets) when the parent lists it.
  if [ "${#toks[@]}" -gt 2 ] && [[ "${toks[2]}" != -* ]] && lists_sub "$help" "${toks[2]}"; then
    path+=("${toks[2]}")
    help="$("$bin" "${path[@]}" --help 2>&1)" || { echo "'tessera ${path[*]} --help' failed"; return; }
  fi
  local t name
  for t in "${toks[@]:2}"; do
    [[ "$t" == -* ]] || continue
    name="${t%%=*}"
    grep -qE -- "(^|[ ,])${name}([ ,=]|$)" <<< "$help" || echo "'tessera ${path[*]}' has no option $name"
  done
}

top_help="$("$bin" --help 2>&1)"
# The checker must catch drift, or this test could not fail.
[ -n "$(check_cmd "tessera no-such-command --help")" ] || fail "checker accepted an unknown subcommand"
[ -n "$(check_cmd "tessera deploy --preset tiny --no-such-option 3")" ] || fail "checker accepted an unknown option"
[ -z "$(check_cmd "tessera deploy --preset tiny --out /tmp/x --seq 9")" ] || fail "checker rejected a valid command"
[ -z "$(check_cmd "tessera gate kernels --preset tiny --seq 9")" ] || fail "checker rejected a nested subcommand"

skills=("$src"/skills/*/SKILL.md)
[ "${#skills[@]}" -ge 8 ] || fail "want >= 8 skills, found ${#skills[@]}"
checked=0
for f in "${skills[@]}"; do
  head -1 "$f" | grep -qx -- "---" || fail "$f: no frontmatter"
  sed -n '2,/^---$/p' "$f" | grep -q "^name: " || fail "$f: frontmatter without name"
  sed -n '2,/^---$/p' "$f" | grep -q "^description: " || fail "$f: frontmatter without description"
  for section in "## When to use" "## Steps" "## What the output means" "## On failure"; do
    grep -q "^$section" "$f" || fail "$f: no '$section' section"
  done
  # Commands in fenced blocks, then inline `tessera ...` code spans.
  cmds="$( (awk '/^ *```/{c=!c; next} c && /^ *tessera /{sub(/^ */,""); print}' "$f";
            { grep -o '`tessera [^`]*`' "$f" || true; } | tr -d '`') | sort -u)"
  while IFS= read -r cmd; do
    [ -n "$cmd" ] || continue
    why="$(check_cmd "$cmd")"
    [ -z "$why" ] || fail "$f cites '$cmd': $why"
    checked=$((checked + 1))
  done <<< "$cmds"
done
[ "$checked" -ge 20 ] || fail "only $checked commands found in skills/"
echo "skills.sh: ok ($checked commands in ${#skills[@]} skills)"
