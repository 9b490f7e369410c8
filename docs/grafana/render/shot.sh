#!/usr/bin/env bash
# make grafana-shot: a screenshot of docs/grafana/superpeer.json drawn by
# Grafana's panel library (@grafana/ui) from a real Prometheus scraping real
# nodes. Not a Grafana server: see entry.jsx for what is drawn as Grafana
# draws it and what is a stand-in.
#
#  1. installs what it needs: Debian's prometheus and fonts-inter (apt), the npm packages of
#     package.json/package-lock.json into $WORK (bin/grafana-shot, ignored);
#  2. bundles entry.jsx with esbuild into $WORK/www;
#  3. starts $NODES `peer run --http` processes on loopback (each its own
#     127.1.0.x address) with $ARGS, and Prometheus scraping their /metrics
#     every $SCRAPE;
#  4. after $KILL_AT seconds stops one superpeer (SIGTERM), so that its
#     cluster elects a successor, and lets the rest run until $DURATION;
#  5. opens the renderer on the run's time range in headless Chromium and
#     writes the whole page to $OUT.
#
# Environment: PEER (the binary), NODES, ARGS, SCRAPE, DURATION, KILL_AT,
# PORT (first of the ports used: nodes' TCP, nodes' HTTP, Prometheus, the
# page's server), WIDTH, OUT.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
WORK=${WORK:-$ROOT/bin/grafana-shot}
PEER=${PEER:-$ROOT/bin/peer}
NODES=${NODES:-8}
ARGS=${ARGS:---superpeers 2 --election bully}
SCRAPE=${SCRAPE:-5s}
DURATION=${DURATION:-420}
KILL_AT=${KILL_AT:-240}
PORT=${PORT:-19300}
WIDTH=${WIDTH:-1600}
OUT=${OUT:-$ROOT/docs/screenshots/grafana-dashboard.png}

sudo=
[ "$(id -u)" = 0 ] || sudo=sudo

# 1. what it needs
command -v chromium >/dev/null || { echo "chromium is missing: make deps installs it" >&2; exit 1; }
# Inter: the font Grafana ships and @grafana/ui measures axis labels in
# (measureText names 'Inter' alone); without it labels are measured in one
# fallback font and drawn in another, and clipped.
apt=()
command -v prometheus >/dev/null || apt+=(prometheus)
fc-list :family=Inter | grep -q . || apt+=(fonts-inter)
if [ ${#apt[@]} -gt 0 ]; then
  echo "installing Debian's ${apt[*]}"
  $sudo apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${apt[@]}"
fi
command -v node >/dev/null && command -v npm >/dev/null || { echo "Node.js 20 or newer and npm are needed" >&2; exit 1; }
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] || { echo "Node.js 20 or newer is needed (found $(node --version))" >&2; exit 1; }

mkdir -p "$WORK"
if ! cmp -s "$HERE/package-lock.json" "$WORK/package-lock.json" || [ ! -d "$WORK/node_modules" ]; then
  echo "installing the npm packages into $WORK (a few minutes the first time)"
  cp "$HERE/package.json" "$HERE/package-lock.json" "$WORK/"
  (cd "$WORK" && npm ci --no-audit --no-fund)
fi

# 2. the renderer
rm -rf "$WORK/www"
mkdir -p "$WORK/www"
cp "$HERE/entry.jsx" "$WORK/entry.jsx"
(cd "$WORK" && ./node_modules/.bin/esbuild entry.jsx --bundle --minify --outfile=www/out.js \
  --define:process.env.NODE_ENV='"production"' --define:global=window \
  --loader:.ttf=file --loader:.woff=file --loader:.woff2=file --loader:.svg=file --loader:.png=file \
  --log-level=warning)
cp "$HERE/index.html" "$ROOT/docs/grafana/superpeer.json" "$WORK/www/"

# 3. the nodes and Prometheus
RUN=$WORK/run
rm -rf "$RUN"
mkdir -p "$RUN"
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap cleanup EXIT

targets=()
boot=
for i in $(seq 1 "$NODES"); do
  id=$("$PEER" id init --out "$RUN/node$i.key")
  tcp=$((PORT + i))
  http=$((PORT + 100 + i))
  a=(run --identity "$RUN/node$i.key" --data-dir "$RUN/node$i.data"
     --listen "/ip4/127.1.0.$i/tcp/$tcp" --http "127.0.0.1:$http" $ARGS)
  [ -z "$boot" ] || a+=(--bootstrap "$boot")
  "$PEER" "${a[@]}" >"$RUN/node$i.log" 2>&1 &
  pids+=($!)
  echo "$!" >"$RUN/node$i.pid"
  [ -n "$boot" ] || boot=/ip4/127.1.0.$i/tcp/$tcp/p2p/$id
  targets+=("\"127.0.0.1:$http\"")
done
PROM_PORT=$((PORT + 200))
cat >"$RUN/prometheus.yml" <<EOF
global:
  scrape_interval: $SCRAPE
  evaluation_interval: $SCRAPE
scrape_configs:
  - job_name: superpeer
    static_configs:
      - targets: [$(IFS=,; echo "${targets[*]}")]
EOF
prometheus --config.file="$RUN/prometheus.yml" --storage.tsdb.path="$RUN/prom" \
  --web.listen-address="127.0.0.1:$PROM_PORT" >"$RUN/prometheus.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 60); do
  curl -fsS "http://127.0.0.1:$PROM_PORT/-/ready" >/dev/null 2>&1 && break
  kill -0 "${pids[-1]}" 2>/dev/null || { echo "prometheus exited:" >&2; tail -5 "$RUN/prometheus.log" >&2; exit 1; }
  sleep 0.5
done
from=$(date +%s%3N)
echo "$NODES nodes ($ARGS) and Prometheus on 127.0.0.1:$PROM_PORT; $DURATION s (one superpeer stopped at $KILL_AT s)"

# 4. stop one superpeer midway
sleep "$KILL_AT"
for i in $(seq 1 "$NODES"); do
  curl -fsS "http://127.0.0.1:$((PORT + 100 + i))/metrics" >/dev/null ||
    { echo "node $i does not answer on its --http address:" >&2; tail -5 "$RUN/node$i.log" >&2; exit 1; }
done
victim=
for i in $(seq 1 "$NODES"); do
  if curl -fsS "http://127.0.0.1:$((PORT + 100 + i))/metrics" | grep -q '^superpeer_role{role="superpeer"} 1$'; then
    victim=$i
    break
  fi
done
if [ -n "$victim" ]; then
  echo "stopping node $victim (a superpeer) at $KILL_AT s"
  kill "$(cat "$RUN/node$victim.pid")"
else
  echo "no superpeer at $KILL_AT s: none stopped" >&2
fi
sleep $((DURATION - KILL_AT))
to=$(date +%s%3N)

# 5. the screenshot
PAGE_PORT=$((PORT + 201))
python3 -m http.server --bind 127.0.0.1 --directory "$WORK/www" "$PAGE_PORT" >"$RUN/http.log" 2>&1 &
pids+=($!)
sleep 1
mkdir -p "$(dirname "$OUT")"
node --experimental-websocket --no-warnings "$HERE/shot.mjs" "$(command -v chromium)" \
  "http://127.0.0.1:$PAGE_PORT/index.html?prom=http://127.0.0.1:$PROM_PORT&from=$from&to=$to&scrape=$SCRAPE&width=$WIDTH" \
  "$OUT" "$WIDTH" "$RUN/chromium"
