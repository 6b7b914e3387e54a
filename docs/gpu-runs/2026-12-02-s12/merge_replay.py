"""Merge session 12's call-3 campaigns into the shipped softmax replay dataset (run once):
the rows of the five shapes call 3 measured replace session 10's; session 10's cluster points at
the other shapes are dropped (their last barrier changed since: other bytes, not measured), so
they replay as not_measured.

    python docs/gpu-runs/2026-12-02-s12/merge_replay.py OLD.jsonl.gz CALL3.jsonl.gz OUT.jsonl.gz
"""

import gzip
import json
import sys

old_path, new_path, out_path = sys.argv[1:4]
old = [json.loads(line) for line in gzip.open(old_path, "rt")]
new = [json.loads(line) for line in gzip.open(new_path, "rt")]
meta_old = next(r for r in old if r.get("kind") == "meta")
meta_new = next(r for r in new if r.get("kind") == "meta")
redone = set(meta_new["shapes"])
kept = [r for r in old if r.get("kind") != "meta" and r["shape"] not in redone
        and (r.get("params") or {}).get("cluster", 1) == 1]
dropped = sum(1 for r in old if r.get("kind") != "meta" and r["shape"] not in redone) - len(kept)
fresh = [r for r in new if r.get("kind") != "meta"]
meta = {**meta_old, "device": meta_new["device"], "date": meta_new.get("date"),
        "domains": meta_new["domains"],
        "vendor_us": {**meta_old["vendor_us"],
                      **{k: v for k, v in meta_new["vendor_us"].items() if k in redone}},
        "commit": f"{meta_old.get('commit')} (six shapes), 04c0286 (the five of call 3)",
        "campaigns": meta_old["campaigns"] - len(redone) + meta_new["campaigns"],
        "measured": len(kept) + len(fresh),
        "note": (f"{meta_old.get('note', '')}; the rows at {', '.join(sorted(redone))} replaced "
                 "by session 12 call 3 (docs/gpu-runs/2026-12-02-s12/call3.sh: the cluster "
                 f"kernels' last barrier a relaxed arrive); {dropped} cluster points of the "
                 "other shapes dropped (other bytes since)")}
with gzip.open(out_path, "wt") as f:
    for r in [meta, *kept, *fresh]:
        f.write(json.dumps(r) + "\n")
sys.stdout.write(f"kept {len(kept)}, dropped {dropped} cluster rows, added {len(fresh)}: "
                 f"{meta['measured']}\n")
