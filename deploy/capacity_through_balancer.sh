#!/usr/bin/env bash
# bench/capacity.py through HAProxy (deploy/haproxy.cfg) in front of two replicas, all on this
# machine's loopback: the same balancer as compose.yaml, without Docker. Each simulated student
# keeps its own cookie jar, as a browser does.
#
#   deploy/capacity_through_balancer.sh [bench/capacity.py's options, e.g. --clients 30 --seconds 20]
#
# Ports: TA_LB_PORT (default 7870) for the balancer, 7871 and 7872 for the replicas. Every
# process it starts is stopped when it ends. Logs: artifacts/lb-*.log.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
LB_PORT=${TA_LB_PORT:-7870}
mkdir -p artifacts
pids=()
stop() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait || true; }
trap stop EXIT

for n in 1 2; do
    port=$((LB_PORT + n))
    GRADIO_ANALYTICS_ENABLED=False HF_HUB_OFFLINE=1 TA_TRUST_PROXY=1 \
        "$PY" app.py --host 127.0.0.1 --port "$port" >"artifacts/lb-app$n.log" 2>&1 &
    pids+=($!)
done
TA_LB_BIND=127.0.0.1:$LB_PORT TA_APP1=127.0.0.1:$((LB_PORT + 1)) TA_APP2=127.0.0.1:$((LB_PORT + 2)) \
    haproxy -db -f deploy/haproxy.cfg >artifacts/lb-haproxy.log 2>&1 &
pids+=($!)

for port in $((LB_PORT + 1)) $((LB_PORT + 2)) "$LB_PORT"; do
    for _ in $(seq 600); do
        "$PY" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/robots.txt', timeout=1)" \
            2>/dev/null && break
        sleep 0.1
    done
done
"$PY" bench/capacity.py --url "http://127.0.0.1:$LB_PORT/" "$@"
