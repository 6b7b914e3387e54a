#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 16e79e4: an 8-shape GEMM set and a 12-shape softmax set, each
# against one campaign a shape; the GEMM set's library at 16 held-out shapes exported as the
# dispatch rule picks (unmeasured) and after `library probe` measured the picks there; the
# softmax set's after the probe.
SOFTMAX_BUDGET=40 SOFTMAX_SET_BUDGET=220 TOTAL_S=555 bash bench/gpu_sets_heldout.sh all
