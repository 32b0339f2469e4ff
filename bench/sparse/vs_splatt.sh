#!/usr/bin/env bash
# Sparse CP-ALS seconds per iteration, Tenfold against SPLATT, interleaved on one machine:
#   bash bench/sparse/vs_splatt.sh SPLATT_SRC DATA_DIR [REPS] [RANKS] [ORDERS] [THREADS]
# SPLATT_SRC is a SPLATT source tree fetched beforehand (github.com/ShadenSmith/splatt;
# this script downloads nothing); it is built there once (splatt.sh).
# DATA_DIR receives the bench's power-law tensors (sparse_cp_bench --save) when absent.
# For each repetition, order and rank (defaults 3, "16 64", "3 4", 1 thread): the load
# average, Tenfold's JSON line (build/bench/sparse_cp_bench, CPU seconds per iteration
# between sweeps 1 and 6, and wall) and SPLATT's CPU seconds per iteration, (CPU of -i 6
# - CPU of -i 1) / 5 of the whole process, and its wall seconds per iteration, the median
# of the 5 it prints after the first; with --csf=all (one tree per mode, as Tenfold).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 SPLATT_SRC DATA_DIR [REPS] [RANKS] [ORDERS] [THREADS]" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
splatt_src=$(cd "$1" && pwd)
data=$2
reps=${3:-3}
ranks=${4:-16 64}
orders=${5:-3 4}
threads=${6:-1}
bench=${BENCH:-$root/build/bench/sparse_cp_bench}
# shellcheck source=bench/sparse/splatt.sh
source "$root/bench/sparse/splatt.sh"
splatt=$(splatt_binary "$splatt_src")
if [ ! -f "$data/power_law_3way.tns" ] || [ ! -f "$data/power_law_4way.tns" ]; then
  mkdir -p "$data"
  "$bench" --ranks 1 --iters 2 --save "$data" >/dev/null
fi
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.time"' EXIT
# CPU seconds of a command (its output in $tmp)
cpu() { /usr/bin/time -f "%U %S" -o "$tmp.time" "$@" >"$tmp"; awk '{print $1 + $2}' "$tmp.time"; }
for rep in $(seq "$reps"); do
  for o in $orders; do
    for r in $ranks; do
      echo "rep $rep order $o rank $r threads $threads $(uptime | sed 's/.*load/load/')"
      "$bench" --ranks "$r" --orders "$o" --iters 6 --threads "$threads" | sed 's/^/tenfold /'
      x=$data/power_law_${o}way.tns
      c1=$(cpu "$splatt" cpd "$x" -r "$r" -i 1 --csf=all --tol 0 --nowrite -t "$threads")
      c6=$(cpu "$splatt" cpd "$x" -r "$r" -i 6 --csf=all --tol 0 --nowrite -t "$threads")
      wall=$(sed -n 's/.*its = *\([2-6]\) (\([0-9.]*\)s).*/\2/p' "$tmp" | sort -g | sed -n 3p)
      echo "splatt cpu_s_per_iter $(awk -v a="$c1" -v b="$c6" 'BEGIN {printf "%.4f", (b - a) / 5}') s_per_iter $wall"
    done
  done
done
