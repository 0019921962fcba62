#!/usr/bin/env bash
# perf/prom_screenshot.sh PROM_URL [OUTDIR] [EXPR] — a PNG of Prometheus's graph page for
# the appliances' goodput (bit/s of payload summed, default EXPR), taken with headless
# Chromium (Debian's `chromium` package): OUTDIR/prometheus_goodput.png (OUTDIR defaults to
# tally-perf-report, where `tally-perf report` writes). Not used by CI.
#   e.g. TALLY_SCREENSHOT=1 meson test -C build --suite prometheus prom_server
set -eu
url=${1:?usage: prom_screenshot.sh PROM_URL [OUTDIR] [EXPR]}
out=${2:-tally-perf-report}
expr=${3:-sum by (appliance) (rate(tally_push_bytes_total[3s])) * 8}
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$chrome" ] || { echo "prom_screenshot.sh: no chromium (apt-get install chromium)" >&2; exit 77; }
mkdir -p "$out"
png=$(cd "$out" && pwd)/prometheus_goodput.png
q=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$expr")
page="$url/graph?g0.expr=$q&g0.tab=0&g0.stacked=0&g0.show_exemplars=0&g0.range_input=1m"
prof=$(mktemp -d /tmp/tly-chrome.XXXXXX)
trap 'rm -rf "$prof"' EXIT
# --virtual-time-budget lets the page's scripts fetch and draw the graph before the shot.
timeout 60 "$chrome" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
	--hide-scrollbars --user-data-dir="$prof" --window-size=1400,900 \
	--virtual-time-budget=15000 --screenshot="$png" "$page" >"$prof/chrome.log" 2>&1 ||
	{ tail -n 20 "$prof/chrome.log" >&2; exit 1; }
[ -s "$png" ] || { echo "prom_screenshot.sh: no PNG written" >&2; exit 1; }
echo "prom_screenshot.sh: $png ($page)"
