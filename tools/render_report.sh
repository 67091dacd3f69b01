#!/usr/bin/env bash
# Renders a deployment's report.html to a PNG with headless Chromium (Debian
# `chromium`), for a person to look at the page as a browser draws it. The page
# loads nothing from the network (no script, font or image), and Chromium is
# told not to either.
# usage: tools/render_report.sh DEPLOY_DIR [OUT.png] [WIDTHxHEIGHT]
set -euo pipefail
dir="${1:?usage: render_report.sh DEPLOY_DIR [OUT.png] [WIDTHxHEIGHT]}"
out="${2:-$dir/report.png}"
size="${3:-1400x3000}"
page="$(cd "$dir" && pwd)/report.html"
[ -s "$page" ] || { echo "render_report: no $page (run tessera deploy or tessera evaluate first)" >&2; exit 2; }
browser="$(command -v chromium || command -v chromium-browser || true)"
[ -n "$browser" ] || { echo "render_report: chromium not installed (apt-get install chromium)" >&2; exit 2; }
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$profile" \
  --screenshot="$(realpath -m "$out")" --window-size="${size/x/,}" "file://$page" >/dev/null 2>&1
[ -s "$out" ] || { echo "render_report: chromium wrote no $out" >&2; exit 1; }
echo "render_report: $out"
