#!/usr/bin/env bash
# check_layers.sh SOURCE_DIR [BUILD_DIR] — the include rules of docs/architecture.md, checked on
# every #include "..." under src/ and include/dtrain/, and (with BUILD_DIR) no circle of calls
# between source files (tools/check_cycles.py on the built objects):
#   * a layer includes public headers of its own layer or of layers below it, never above;
#   * a layer includes only its own internal headers (src/<layer>/*_impl.h and other headers
#     under src/<layer>/), except the lower layers' internal interfaces listed in INTERFACES.
# Prints every violation as FILE:LINE: message, then "N passed, M failed"; exits 1 on any.
set -u
SRC=${1:-.}
BUILD=${2:-}
[ -z "$BUILD" ] || BUILD=$(cd "$BUILD" && pwd) || exit 2
cd "$SRC" || exit 2

# The layers, lowest first (nn below optim: optimizers step modules' flat buffers).
LAYERS=(base tensor nn optim dist data lm engine trial config search launch dsat bench master web cli)
# Public header -> layer. A new header must be added here (the check fails until it is).
declare -A HEADER=(
  [base.h]=base
  [tensor.h]=tensor [nn.h]=nn [optim.h]=optim [dist.h]=dist [data.h]=data
  [engine.h]=engine [pipe.h]=engine
  [trial.h]=trial [trialio.h]=trial [core.h]=trial [dtrain.h]=trial
  [lm.h]=lm [tokenizer.h]=lm
  [config.h]=config [search.h]=search
  [client.h]=master
)
# Internal headers a higher layer may include: each is documented in its header comment as
# its layer's interface to the layers above.
# The tool's own modules (the dtrain command, the master, the web UI) are declared in headers
# beside their sources, not installed: they are interfaces too.
INTERFACES=" base/base_impl.h tensor/tensor_iface.h nn/nn_iface.h master/http.h "
INTERFACES+="base/confcheck.h base/path.h launch/launch.h launch/launcher.h dsat/dsat.h "
INTERFACES+="bench/bench.h master/master.h web/web.h trial/trial_iface.h search/searcher.h "
INTERFACES+="base/durable.h base/yaml.h config/expconf_doc.h engine/engine_iface.h data/data_iface.h "
INTERFACES+="master/snapshot.h "
INTERFACES+="base/numtext.h "
# Headers the build generates (CMakeLists.txt), with the one file allowed to include each.
declare -A GENERATED=([dt_build_paths.h]=src/launch/modeldir.c)

rank() { local i; for i in "${!LAYERS[@]}"; do [ "${LAYERS[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }

pass=0
fail=0
bad() { fail=$((fail + 1)); echo "$1"; }

while IFS= read -r hit; do
  file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; text=${rest#*:}
  inc=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' <<< "$text")
  [ -n "$inc" ] || continue
  case $file in
    include/dtrain/*) me=${HEADER[$(basename "$file")]:-} ;;
    src/*) me=$(cut -d/ -f2 <<< "$file") ;;
  esac
  if [ -z "$me" ] || [ "$(rank "$me")" -lt 0 ]; then
    bad "$file:$line: the file's layer is not in tools/check_layers.sh's table"; continue
  fi
  case $inc in
    dtrain/*)
      h=${HEADER[$(basename "$inc")]:-}
      if [ -z "$h" ]; then
        bad "$file:$line: public header $inc has no layer in tools/check_layers.sh's table"
      elif [ "$(rank "$h")" -gt "$(rank "$me")" ]; then
        bad "$file:$line: $me includes $inc of the $h layer above it"
      else pass=$((pass + 1)); fi ;;
    *)
      # resolve a path relative to the including file, or to src/
      dir=$(dirname "$file")
      if [ "${GENERATED[$inc]:-}" = "$file" ]; then pass=$((pass + 1)); continue; fi
      if [ -f "$dir/$inc" ]; then target=$(realpath --relative-to=src -m "$dir/$inc")
      elif [ -f "src/$inc" ]; then target=$inc
      else bad "$file:$line: cannot find \"$inc\""; continue; fi
      owner=$(cut -d/ -f1 <<< "$target")
      if [ "$owner" = "$me" ]; then pass=$((pass + 1))
      elif [[ $INTERFACES == *" $target "* ]] && [ "$(rank "$owner")" -lt "$(rank "$me")" ]; then
        pass=$((pass + 1))
      else
        bad "$file:$line: $me includes $target, internal to the $owner layer"
      fi ;;
  esac
done < <(grep -rn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' src include/dtrain)

if [ -n "$BUILD" ]; then
  # each file without a circle is a pass, each circle a failure (printed with its files)
  cycles=$(python3 tools/check_cycles.py "$BUILD")
  rc=$?
  grep -v ' passed, ' <<< "$cycles"
  counts=$(tail -1 <<< "$cycles")
  if [ $rc -gt 1 ] || ! [[ $counts =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    bad "tools/check_cycles.py: $counts"
  else
    pass=$((pass + BASH_REMATCH[1])); fail=$((fail + BASH_REMATCH[2]))
  fi
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
