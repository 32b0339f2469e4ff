#!/usr/bin/env bash
# Sparse CP-ALS per CSF layout, Tenfold against SPLATT on one file, interleaved:
#   bash bench/sparse/layouts.sh SPLATT_SRC FILE [RANK] [ITERS] [THREADS] [LAYOUTS] [REPS]
# SPLATT_SRC is a SPLATT source tree fetched beforehand (built there once: splatt.sh;
# this script downloads nothing). FILE is a .tns
# file both programs read; when it is absent it is drawn first by
# `sparse_cp_bench --write FILE $GENERATE` (e.g. GENERATE="--preset nell2 --nnz 10000000").
# For each repetition and layout (defaults: rank 16, 4 iterations, 2 threads, "one two all",
# 1 repetition), Tenfold (sparse_cp_bench --input FILE --csf L) then SPLATT (splatt cpd
# FILE --csf=L), each under /usr/bin/time -v, print one line each: wall seconds per
# iteration after the first (Tenfold: between the ends of sweeps 1 and ITERS; SPLATT: the
# mean of the per-iteration times it prints, 2 to ITERS) and the peak resident memory of
# the whole process in MB (10^6 bytes), reading the file included; the load average
# before each pair.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 SPLATT_SRC FILE [RANK] [ITERS] [THREADS] [LAYOUTS] [REPS]" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
splatt_src=$(cd "$1" && pwd)
file=$2
rank=${3:-16}
iters=${4:-4}
threads=${5:-2}
layouts=${6:-one two all}
reps=${7:-1}
bench=${BENCH:-$root/build/bench/sparse_cp_bench}
# shellcheck source=bench/sparse/splatt.sh
source "$root/bench/sparse/splatt.sh"
splatt=$(splatt_binary "$splatt_src")
if [ ! -f "$file" ]; then
  # shellcheck disable=SC2086  # GENERATE holds several arguments
  "$bench" --write "$file" ${GENERATE:-}
fi
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.time"' EXIT
# A number from the JSON line last printed (in $tmp).
field() { tail -n 1 "$tmp" | sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
# Runs a command under /usr/bin/time -v (its output in $tmp); prints its peak RSS in MB.
peak_mb() {
  /usr/bin/time -v -o "$tmp.time" "$@" >"$tmp"
  awk '/Maximum resident set size/ {printf "%.0f", $NF * 1024 / 1e6}' "$tmp.time"
}
for rep in $(seq "$reps"); do
  for layout in $layouts; do
    echo "rep $rep layout $layout rank $rank threads $threads $(uptime | sed 's/.*load/load/')"
    rss=$(peak_mb "$bench" --input "$file" --csf "$layout" --ranks "$rank" --iters "$iters" \
      --threads "$threads")
    echo "tenfold $layout s_per_iter $(field s_per_iter) peak_rss_mb $rss" \
      "csf_build_s $(field csf_build_s) nnz $(field nnz)"
    rss=$(peak_mb "$splatt" cpd "$file" -r "$rank" -i "$iters" --csf="$layout" --tol 0 \
      --nowrite -t "$threads")
    per_iter=$(sed -n 's/.*its = *\([0-9]*\) (\([0-9.]*\)s).*/\1 \2/p' "$tmp" |
      awk '$1 > 1 {s += $2; n++} END {if (n) printf "%.4f", s / n}')
    echo "splatt $layout s_per_iter $per_iter peak_rss_mb $rss"
  done
done
