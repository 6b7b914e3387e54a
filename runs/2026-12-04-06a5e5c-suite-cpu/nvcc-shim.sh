#!/bin/bash
# measurement shim: logs a key (flags + input content hash) and CPU time of each nvcc run
real=/usr/local/cuda-13.0/bin/nvcc
key=""; skip=0
for a in "$@"; do
  if [ $skip = 1 ]; then skip=0; key="$key OUT"; continue; fi
  case "$a" in
    -o) skip=1; key="$key -o";;
    *.cu) key="$key $(sha256sum "$a" | cut -c1-16)";;
    *) key="$key $a";;
  esac
done
tf=$(mktemp ./t.XXXXXX)
/usr/bin/time -f '%U %S %e' -o "$tf" "$real" "$@"
rc=$?
k=$(printf '%s' "$key" | sha256sum | cut -c1-16)
par=$(tr "\0" " " < /proc/$PPID/cmdline | cut -c1-80 | tr " " "_"); echo "${TFM_FILE:-?} $k $(cat "$tf" | tail -1) $rc $par ${key:0:200}" >> per-file/nvcc.log
rm -f "$tf"
exit $rc
