#!/usr/bin/env bash
# Installs the current build into a temporary prefix (no rebuild) and uses it from there as a
# user would: `dtrain train` on tests/e2e/toy, a program built with `pkg-config --cflags --libs
# dtrain`, a CMake project with find_package(dtrain); and a copy of the build's binary outside
# the source tree still finds the headers and library its build recorded.
# usage: test_install.sh BUILD_DIR SOURCE_DIR [CMAKE]
# Prints "N passed, M failed" and exits non-zero on any failure; the prefix is always removed.
set -u
BUILD=$(realpath "$1")
SRC=$(realpath "$2")
CMAKE=${3:-cmake}
W=$(mktemp -d /tmp/dtrain-install.XXXXXX)
trap 'rm -rf "$W"' EXIT
trap 'exit 1' INT TERM HUP
unset DTRAIN_INCLUDE DTRAIN_LIBDIR
. "$SRC/tests/e2e/check.sh"

TOY=$SRC/tests/e2e/toy
CFG=$TOY/const.yaml
cd "$W" || exit 1

# 1. install into one prefix, then move it: everything below runs from a prefix that neither
# the build nor the install ever named
"$CMAKE" --install "$BUILD" --prefix "$W/stage" > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "cmake --install: $(tail -5 "$W/o")"
mv "$W/stage" "$W/prefix"
P=$(realpath "$W/prefix")
for f in bin/dtrain lib/libdtrain.so.0.1.0 include/dtrain/dtrain.h include/dtrain/client.h \
    lib/pkgconfig/dtrain.pc lib/cmake/dtrain/dtrainConfig.cmake \
    lib/cmake/dtrain/dtrainConfigVersion.cmake lib/cmake/dtrain/dtrainTargets.cmake; do
  check '[ -f "$P/$f" ]' "not installed: $f"
done
check '[ "$(readlink "$P/lib/libdtrain.so")" = libdtrain.so.0 ] &&
    [ "$(readlink "$P/lib/libdtrain.so.0")" = libdtrain.so.0.1.0 ]' \
    "libdtrain.so -> libdtrain.so.0 -> libdtrain.so.0.1.0: $(ls -l "$P/lib")"
check 'readelf -d "$P/lib/libdtrain.so.0.1.0" | grep -q "SONAME.*\[libdtrain.so.0\]"' \
    "soname: $(readelf -d "$P/lib/libdtrain.so.0.1.0" | grep SONAME)"
check 'readelf -d "$P/bin/dtrain" | grep -q "RUNPATH.*\[\$ORIGIN/../lib:"' \
    "bin/dtrain RUNPATH: $(readelf -d "$P/bin/dtrain" | grep PATH)"

# a model directory whose Makefile records the toolchain `dtrain train` hands it
mkdir -p "$W/mk"
cp "$TOY/model_def.c" "$W/mk/"
printf 'model_def.so: model_def.c\n\techo "$(DTRAIN_INCLUDE) $(DTRAIN_LIBDIR)" > toolchain\n\t$(CC) -shared -fPIC -O2 -I$(DTRAIN_INCLUDE) -o $@ model_def.c -L$(DTRAIN_LIBDIR) -ldtrain\n' \
    > "$W/mk/Makefile"
# toolchain_of BINARY: train the Makefile model directory with BINARY; prints what it was given
toolchain_of() {
  rm -f "$W/mk/model_def.so" "$W/mk/toolchain"
  "$1" train "$CFG" "$W/mk" --test-mode --checkpoint-dir "$W/mkck$2" --quiet > "$W/o" 2>&1 &&
    cat "$W/mk/toolchain"
}

# 2. the installed dtrain trains the toy model directory (its *.c compiled against the
# installed headers and library), and hands exactly those to a model Makefile
"$P/bin/dtrain" train "$CFG" "$TOY" --max-length 5b --checkpoint-dir "$W/ck" \
    --metrics-out "$W/m.jsonl" --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && [ "$(cat "$W/ck/latest")" = batch_5 ] &&
    grep -q "\"kind\":\"training\"" "$W/m.jsonl"' "installed dtrain train: $(tail -5 "$W/o")"
tc=$(toolchain_of "$P/bin/dtrain" 1)
check '[ "$tc" = "$P/include $P/lib" ]' \
    "installed dtrain should build against $P/include $P/lib, got '$tc': $(tail -5 "$W/o")"

# 3. DTRAIN_INCLUDE overrides; a wrong one is an error naming it, with a hint
tc=$(DTRAIN_INCLUDE=$SRC/include toolchain_of "$P/bin/dtrain" 2)
check '[ "$tc" = "$(realpath "$SRC/include") $P/lib" ]' "DTRAIN_INCLUDE override: got '$tc'"
DTRAIN_INCLUDE=$W/nowhere "$P/bin/dtrain" train "$CFG" "$TOY" --checkpoint-dir "$W/x" > "$W/o" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "DTRAIN_INCLUDE=$W/nowhere does not hold dtrain/dtrain.h" "$W/o" &&
    grep -q "hint" "$W/o"' "bad DTRAIN_INCLUDE: $(cat "$W/o")"

# 4. a copy of the build's binary outside the source tree (as an out-of-tree build's is):
# nothing next to it, so it builds against the build tree's recorded headers and library
mkdir -p "$W/elsewhere"
cp "$BUILD/dtrain" "$W/elsewhere/dtrain"
tc=$(toolchain_of "$W/elsewhere/dtrain" 3)
check '[ "$tc" = "$(realpath "$SRC/include") $(realpath "$BUILD")" ]' \
    "a copied build binary should use the recorded build tree, got '$tc': $(tail -5 "$W/o")"

# 5. a program built with pkg-config against the installed library
export PKG_CONFIG_PATH=$P/lib/pkgconfig
check '[ "$(pkg-config --modversion dtrain)" = 0.1.0 ]' "pkg-config --modversion dtrain"
flags=$(pkg-config --cflags --libs dtrain)
cc -std=gnu11 -Wall -Werror "$SRC/tests/e2e/install/prog.c" -o "$W/prog" $flags > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "cc prog.c $flags: $(cat "$W/o")"
out=$(LD_LIBRARY_PATH=$P/lib "$W/prog" 2>&1)
check '[ "$out" = "dtrain ok 11" ]' "pkg-config program: $out"
check 'readelf -d "$W/prog" | grep -q "NEEDED.*\[libdtrain.so.0\]"' "the program needs the soname"

# 6. a CMake project with find_package(dtrain REQUIRED) and dtrain::dtrain
"$CMAKE" -S "$SRC/tests/e2e/install" -B "$W/consumer" -DCMAKE_PREFIX_PATH="$P" > "$W/o" 2>&1 &&
  "$CMAKE" --build "$W/consumer" >> "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "find_package(dtrain) project: $(tail -15 "$W/o")"
out=$("$W/consumer/prog" 2>&1)
check '[ "$out" = "dtrain ok 11" ]' "find_package(dtrain) program: $out"

summary
