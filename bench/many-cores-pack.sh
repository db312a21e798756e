#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# bench/many-cores-pack.sh BUILD DEST
#
# Packs BUILD's release klbench for a machine that has nothing installed: the binary,
# libklock and every shared library ldd names (glibc's loader included) go to DEST/lib,
# and DEST/klbench starts the binary through the packed loader, so the machine's own
# libraries (or their absence) do not matter. bench/many-cores-ab.sh takes DEST/klbench
# as KLOCK_AB_OLD or KLOCK_AB_NEW.
#
#   bash bench/many-cores-pack.sh build-old build-ab/old
set -euo pipefail

if [ $# -ne 2 ]; then
	echo "usage: bench/many-cores-pack.sh BUILD DEST" >&2
	exit 2
fi
kb=$1/bench/klbench
[ -x "$kb" ] || { echo "many-cores-pack: no $kb (ninja -C $1 bench/klbench)" >&2; exit 1; }
dest=$2
rm -rf "$dest"
mkdir -p "$dest/lib"
cp "$kb" "$dest/lib/klbench.bin"
loader=
# ldd lines: "name => /path (addr)" or "/lib64/ld-linux-x86-64.so.2 (addr)"
while read -r a b c _; do
	if [ "$b" = "=>" ] && [ -f "$c" ]; then
		cp -L "$c" "$dest/lib/$a"
	elif [ -f "$a" ]; then
		cp -L "$a" "$dest/lib/$(basename "$a")"
		loader=$(basename "$a")
	fi
done < <(ldd "$kb")
[ -n "$loader" ] || { echo "many-cores-pack: ldd named no loader for $kb" >&2; exit 1; }
cat >"$dest/klbench" <<EOF
#!/bin/sh
# klbench through its packed loader and libraries (bench/many-cores-pack.sh)
d=\$(cd "\$(dirname "\$0")" && pwd)/lib
exec "\$d/$loader" --library-path "\$d" "\$d/klbench.bin" "\$@"
EOF
chmod +x "$dest/klbench"
# The revision the build was made from (many-cores-ab.sh prints it in machine.txt).
src=$(sed -n 's/.*"source": *"\([^"]*\)".*/\1/p' "$1/meson-info/meson-info.json" 2>/dev/null | head -1)
rev=$(git -C "${src:-.}" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "${src:-.}" diff --quiet HEAD 2>/dev/null || rev="$rev (with uncommitted changes)"
echo "$rev" >"$dest/revision"
"$dest/klbench" --version >/dev/null
echo "many-cores-pack: $dest/klbench ($(du -sh "$dest" | cut -f1))"
