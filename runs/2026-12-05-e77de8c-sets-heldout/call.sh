#!/usr/bin/env bash
# nvidia-h200, at e77de8c: both families' shape sets and their exported libraries at 16
# held-out shapes beside the vendor and the strongest peer (the script's own budgets)
export TUNEFORGE_COMMIT=e77de8c; bash bench/gpu_sets_heldout.sh 2>&1 | tail -45
