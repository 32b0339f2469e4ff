# shellcheck shell=bash
# Sourced by the SPLATT comparisons (vs_splatt.sh, layouts.sh):
#   splatt=$(splatt_binary SPLATT_SRC)
# The splatt program of a SPLATT source tree fetched beforehand (github.com/ShadenSmith/
# splatt; nothing is downloaded), built there once as its README says (./configure
# --index-size=64 --precision=double; make: build/<system>-<machine>/bin/splatt) unless
# it is built already. Its build output goes to stderr.
splatt_binary() {
  local src=$1 bin
  bin=$(find "$src/build" -path '*/bin/splatt' -type f 2>/dev/null | head -n 1)
  if [ -z "$bin" ]; then
    (cd "$src" && ./configure --index-size=64 --precision=double && make -j2) >&2
    bin=$(find "$src/build" -path '*/bin/splatt' -type f | head -n 1)
  fi
  echo "$bin"
}
