#!/usr/bin/env bash
# tests/capi/symbols_test.sh LIBRARY HEADER — libbaton.so exports exactly
# the functions <baton/baton.h> declares (nothing of the C++ inside it, of
# libstdc++ or of the store libraries), and its SONAME is libbaton.so.<N>.
set -euo pipefail
lib=$1
header=$2
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')
if [[ ! "$soname" =~ ^libbaton\.so\.[0-9]+$ ]]; then
  echo "SONAME is '$soname', not libbaton.so.<N>" >&2
  exit 1
fi
exported=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
# Declarations: "<type> baton_name(" at the start of a line, after the
# comments are removed (a return type may be on the same line only).
declared=$(sed -e 's:/\*.*\*/::g' -e '/\/\*/,/\*\//d' "$header" |
  grep -oE '^[a-z0-9_ ]+[ *]+baton_[a-z0-9_]+\(' |
  sed -E 's/.*[ *](baton_[a-z0-9_]+)\($/\1/' | sort -u)
stray=$(comm -23 <(echo "$exported") <(echo "$declared"))
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
if [[ -n "$stray" ]]; then
  echo "exported but not declared in $header:" >&2
  echo "$stray" | head -50 >&2
fi
if [[ -n "$missing" ]]; then
  echo "declared in $header but not exported:" >&2
  echo "$missing" >&2
fi
[[ -z "$stray" && -z "$missing" ]] || exit 1
echo "symbols: $(echo "$exported" | wc -l) exported, all declared in baton.h; SONAME $soname"
