#!/usr/bin/env bash
# Checks the dynamic symbol table of libtenfold.so: the public API is there, and nothing
# internal (tenfold::...::detail::, nlohmann::json, other libraries' code) is exported.
set -euo pipefail
lib=$1
symbols=$(nm -DC --defined-only "$lib" | cut -d' ' -f3-)
count=$(printf '%s\n' "$symbols" | wc -l)
leaks=$(printf '%s\n' "$symbols" | grep -E 'detail::|nlohmann' || true)
foreign=$(printf '%s\n' "$symbols" | grep -v 'tenfold::' || true)
status=0
if [ -n "$leaks" ]; then
  echo "internal symbols exported:"; printf '%s\n' "$leaks" | head -20; status=1
fi
if [ -n "$foreign" ]; then
  echo "symbols of no Tenfold name exported:"; printf '%s\n' "$foreign" | head -20; status=1
fi
for api in 'tenfold::cp_als<double>(tenfold::TensorView<double const>' \
           'tenfold::cp_als<std::complex<float> >(tenfold::TensorView<std::complex<float> const>' \
           'tenfold::tucker<float>(' 'tenfold::set_num_threads(int)' 'tenfold::OnThisThread::OnThisThread()' \
           'tenfold::transpose<double>(tenfold::TensorView<double const>)' \
           'typeinfo for tenfold::InvalidArgument' 'typeinfo for tenfold::Cancelled'; do
  # (a here-string, not a pipe: grep -q stops at the first match, and under pipefail the
  # writer's SIGPIPE would count as a miss)
  if ! grep -qF "$api" <<<"$symbols"; then
    echo "public API missing: $api"; status=1
  fi
done
echo "$count exported symbols, $([ $status -eq 0 ] && echo all public API || echo PROBLEMS)"
exit $status
