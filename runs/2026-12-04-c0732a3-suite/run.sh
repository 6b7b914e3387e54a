#!/usr/bin/env bash
# The clean-clone suite of c0732a3 with the 40 slowest tests, each line of its log timestamped.
rm -rf /tmp/ci-suite && git clone -q /work/wt/suite /tmp/ci-suite && cd /tmp/ci-suite
start=$(date +%s)
PYTEST_ARGS="--durations=40" .ci/run > /tmp/ci-suite.log 2>&1
echo "rc=$? total=$(( $(date +%s) - start ))s" >> /tmp/ci-suite.log
# beside it: tail -F /tmp/ci-suite.log | while IFS= read -r l; do echo "$(date +%T) $l"; done
# (pip's warnings about a missing local index folder left out of ci-run.log)
