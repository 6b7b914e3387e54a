#!/usr/bin/env bash
# The distributed service on one H200: Postgres + Redis (shared/gpu-host), tuneforge serve, agent,
# compile and GPU workers (--backend gpu), one campaign submitted and watched over HTTP.
# Setup on the dev box (ignored folder, carried with the command):
#   mkdir -p .gpu/svc/wheels && cp ../shared/wheels/*.whl .gpu/svc/wheels/
#   cp -r ../shared/gpu-host .gpu/svc/gpu-host && cp runs/2026-11-29-7f54b9d-service/run.sh .gpu/svc/
#   ../shared/tools/device-wheels.sh .gpu/svc/wheels "celery[redis]>=5.4" "psycopg[binary]>=3.1" \
#       fastapi "uvicorn>=0.29" sqlalchemy pydantic pydantic-settings typer alembic jinja2 httpx anyio
# then, on the GPU machine: bash .gpu/svc/run.sh   (carry .gpu/svc)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/svc/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
eval "$(bash .gpu/svc/gpu-host/start-services.sh)"
export TUNEFORGE_HOME=/tmp/tfhome TUNEFORGE_BACKEND=gpu TUNEFORGE_HEARTBEAT_S=1
export TUNEFORGE_API_URL=http://127.0.0.1:8765
TF="python3 -m cli.main"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
git rev-parse --short HEAD 2>/dev/null | tee "$OUT/commit.txt"
$TF admin migrate || exit 1
KEY=$($TF admin create-team gpu-run) || exit 1
$TF serve --port 8765 > "$OUT/api.log" 2>&1 & P1=$!
$TF worker --role agent > "$OUT/agent.log" 2>&1 & P2=$!
$TF worker --role compile --concurrency 8 > "$OUT/compile.log" 2>&1 & P3=$!
$TF worker --role gpu --backend gpu --gpus 0 --loglevel INFO > "$OUT/gpu.log" 2>&1 & P4=$!
python3 - <<'PY' || { tail -n 40 "$OUT"/*.log; exit 1; }
import time, httpx, os
from sqlalchemy import create_engine, text
e = create_engine(os.environ["TUNEFORGE_DATABASE_URL"])
for _ in range(300):
    try:
        up = httpx.get("http://127.0.0.1:8765/api/v1/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        up = False
    with e.connect() as c:
        roles = {r for (r,) in c.execute(text("select role from worker_heartbeats where last_seen > now() - interval '5 seconds'"))}
    if up and roles >= {"agent", "compile", "gpu"}:
        print("stack up", sorted(roles)); break
    time.sleep(0.5)
else:
    raise SystemExit("stack did not come up")
PY
echo '{"shape": {"m": 4096, "n": 4096, "k": 4096}, "budget": {"iterations": 40}, "parallel": 1}' > /tmp/spec.json
export TUNEFORGE_API_KEY=$KEY
START=$(date +%s.%N)
ID=$($TF submit /tmp/spec.json) || exit 1
COLUMNS=100 timeout 420 $TF watch "$ID" > "$OUT/watch.txt" 2> "$OUT/watch.err"; echo "watch rc $?"
END=$(date +%s.%N)
$TF export "$ID" --format cu --out "$OUT/best.cu"
$TF export "$ID" --format json --out "$OUT/history.json"
curl -s -H "X-API-Key: $KEY" http://127.0.0.1:8765/api/v1/workers > "$OUT/workers.json"
curl -s -H "X-API-Key: $KEY" "http://127.0.0.1:8765/api/v1/campaigns/$ID" > "$OUT/campaign.json"
curl -s http://127.0.0.1:8765/api/v1/metrics > "$OUT/metrics.txt"
kill -TERM $P1 $P2 $P3 $P4; wait
python3 - "$OUT" "$START" "$END" <<'PY'
import json, sys, collections
out, start, end = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
h = json.load(open(f"{out}/history.json"))
c = h["campaign"]
st = collections.Counter(x["status"] for x in h["candidates"])
print(f"campaign {c['id'][:8]} {c['status']} ({c['status_reason']}) backend={c['backend']} gpu={c['gpu']}")
print(f"evaluations {c['evaluations']} in {end - start:.1f} s wall; statuses {dict(st)}")
b = c["best"] or {}
print(f"best {b.get('avg_us')} us = {b.get('throughput_tflops')} TFLOP/s; baseline {(c['baseline'] or {}).get('avg_us')} us; vendor_us {c['vendor_us']} ({c['pct_of_vendor']}% of cuBLAS)")
print("attempts>1:", sum(1 for x in h["candidates"] if x["attempts"] > 1))
for w in json.load(open(f"{out}/workers.json")):
    print("worker", w["role"], w["name"], w["backend"], (w["gpu"] or {}).get("name"), "evaluations", w["evaluations"])
PY
