#!/usr/bin/env bash
# Multi-host trials over MPI, on two hosts made as network namespaces (tests/cluster/netns.sh):
# OpenMPI's mpirun reaches them through an rsh agent that enters the namespace, TCP between them.
#   1. data parallel and ZeRO-2 over 2 hosts x 2 ranks match 1 host x 4 ranks (<= 1e-6 on every
#      checkpointed tensor and every metric)
#   2. a pipeline of 2 stages, one per host
#   3. a hostfile with too few slots, a missing hostfile: clear errors before mpirun
#   4. a master bound to the bridge's address (token required) runs a 4-slot trial over a
#      hostfile of agents; one host's processes killed: the run fails with mpirun's error, the
#      master restarts the trial from its checkpoint and the experiment completes
# usage: test_mpi_hosts.sh DTRAIN_BINARY SOURCE_DIR
# Needs root; exits 77 (skipped) with the reason where the kernel refuses namespaces. Everything
# it makes (namespaces, bridge, processes, files) is removed on exit, failing or not.
set -u
DTRAIN=$1
SRC=$2
PY=${PYTHON:-python3}
. "$SRC/tests/e2e/check.sh"
. "$SRC/tests/cluster/netns.sh"
W=$(mktemp -d /tmp/dtrain-mpihosts.XXXXXX)
MPID=
cleanup() {
    [ -n "$MPID" ] && kill -9 "$MPID" 2> /dev/null
    # only a real group: `kill -- -0` would be this script's own group, and ctest's with it
    for g in $(cat "$W"/pgids 2> /dev/null); do [ "$g" -gt 1 ] && kill -9 -- "-$g" 2> /dev/null; done
    rm -rf "$W"
}
NETNS_ON_EXIT=cleanup
netns_up 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
HF=$W/hosts NETNS_HF1=$W/hosts1
netns_hostfile "$HF" 2
netns_hostfile "$NETNS_HF1" 1
reached() { # both hosts were reached through the agent since the log was cleared
    [ "$(sort -u "$NETNS_DIR/rsh.log" 2> /dev/null | wc -l)" -eq 2 ]
}

# 1. data parallel: the MLP (plain trial, 4 global batches) and ZeRO-2 (the engine trial)
FASHION=$SRC/examples/fashion_mnist
DS=$SRC/examples/fashion_mnist_ds
sed 's/deepspeed_config: ds_config.json/deepspeed_config: ds_config_zero2.json/' \
    "$DS/const.yaml" > "$W/zero2.yaml"
for run in "dp $FASHION/const.yaml $FASHION 4b" "zero2 $W/zero2.yaml $DS 3b"; do
    read -r name cfg dir len <<< "$run"
    : > "$NETNS_DIR/rsh.log"
    "$DTRAIN" train "$cfg" "$dir" --hostfile "$HF" --slots 4 --max-length "$len" \
        --checkpoint-dir "$W/$name-hosts" --metrics-out "$W/$name-hosts.jsonl" --quiet > "$W/o" 2>&1
    rc=$?
    check '[ $rc -eq 0 ]' "$name over 2 hosts x 2: exit $rc: $(tail -5 "$W/o")"
    check reached "$name: mpirun reached both hosts: $(cat "$NETNS_DIR/rsh.log")"
    check 'ls "$W/$name-hosts/tensorboard/" | grep -q "$NETNS_ID-host0"' \
        "$name: the chief ran on host 0 and wrote the events: $(ls "$W/$name-hosts/tensorboard/")"
    "$DTRAIN" train "$cfg" "$dir" --slots 4 --max-length "$len" --checkpoint-dir "$W/$name-local" \
        --metrics-out "$W/$name-local.jsonl" --quiet > "$W/o" 2>&1
    rc=$?
    check '[ $rc -eq 0 ]' "$name on 1 host x 4: exit $rc: $(tail -5 "$W/o")"
    $PY "$SRC/tests/cluster/compare_runs.py" 1e-6 "$W/$name-hosts" "$W/$name-hosts.jsonl" \
        "$W/$name-local" "$W/$name-local.jsonl" > "$W/cmp" 2>&1
    rc=$?
    check '[ $rc -eq 0 ]' "$name: 2 hosts x 2 vs 1 host x 4: $(cat "$W/cmp")"
    echo "$name: $(tail -1 "$W/cmp")"
done
check '[ -f "$W/zero2-hosts/$(cat "$W/zero2-hosts/latest")/model0/optim_shard_3_of_4.safetensors" ]' \
    "zero2: every rank's optimizer shard in the shared checkpoint directory"

# 2. a pipeline of 2 stages, one on each host
PP=$SRC/examples/char_gpt_pipe
: > "$NETNS_DIR/rsh.log"
"$DTRAIN" train "$PP/const.yaml" "$PP" --hostfile "$NETNS_HF1" --slots 2 --max-length 2b \
    --checkpoint-dir "$W/pp" --metrics-out "$W/pp.jsonl" --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 0 ] && [ "$(cat "$W/pp/latest" 2> /dev/null)" = batch_2 ]' \
    "pipeline over 2 hosts: exit $rc: $(tail -5 "$W/o")"
check reached "pipeline: mpirun reached both hosts: $(cat "$NETNS_DIR/rsh.log")"
check 'grep -q "\"kind\":\"validation\"" "$W/pp.jsonl"' "pipeline: validated: $(cat "$W/pp.jsonl")"

# 3. bad hostfiles: clear errors, nothing started
"$DTRAIN" train "$FASHION/const.yaml" "$FASHION" --hostfile "$NETNS_HF1" --slots 4 \
    --max-length 1b --checkpoint-dir "$W/bad" --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "needs 4 slots but hostfile .* has 2" "$W/o"' \
    "too few slots: exit $rc: $(cat "$W/o")"
"$DTRAIN" train "$FASHION/const.yaml" "$FASHION" --hostfile "$W/none" --slots 2 \
    --max-length 1b --checkpoint-dir "$W/bad" --quiet > "$W/o" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "cannot read hostfile" "$W/o"' "missing hostfile: exit $rc: $(cat "$W/o")"
check '[ ! -e "$W/bad/latest" ]' "a refused launch wrote no checkpoint"

# 4. the master over a hostfile of agents, bound to the bridge's address: the trials reach it
# from the namespaces with the token
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("'"$NETNS_GW"'", 0)); print(s.getsockname()[1])')
export DTRAIN_HOME=$W/home DTRAIN_MASTER=http://$NETNS_GW:$PORT
API="$PY $SRC/tests/e2e/api.py"
"$DTRAIN" master --host "$NETNS_GW" --port "$PORT" --hostfile "$HF" >> "$W/master.log" 2>&1 &
MPID=$!
export DTRAIN_TOKEN=
for _ in $(seq 100); do
    [ -s "$DTRAIN_HOME/master.token" ] && DTRAIN_TOKEN=$(cat "$DTRAIN_HOME/master.token") &&
        $API get /api/v1/master 'r["pid"]' > /dev/null 2>&1 && break
    sleep 0.1
done
check '$API get /api/v1/master "r[\"slots\"]" | grep -qx 4' \
    "master with a hostfile of 2 x 2 slots: $(tail -5 "$W/master.log")"
: > "$NETNS_DIR/rsh.log"
# the toy trial, slow enough to act on: 4 slots, a checkpoint every 10 batches, 60 batches
E=$($API create "$SRC/tests/e2e/toy/const.yaml" "$SRC/tests/e2e/toy" resources.slots_per_trial=4 \
    hyperparameters.batch_ms=60 'searcher.max_length={batches: 60}' \
    'min_checkpoint_period={batches: 10}' "checkpoint_storage.host_path=$W/shared")
T=$($API get "/api/v1/experiments/$E/trials" 'r["trials"][0]["id"]' 2> /dev/null)
$API until "/api/v1/trials/$T" 'r["trial"]["batches"] >= 25 and r["trial"].get("pgid")' 120
rc=$?
check '[ $rc -eq 0 ]' "the trial trains on the hosts: $(tail -5 "$W/master.log")"
$API get "/api/v1/trials/$T" 'r["trial"].get("pgid") or ""' >> "$W/pgids" 2> /dev/null
check reached "master: the trial's mpirun reached both hosts: $(cat "$NETNS_DIR/rsh.log")"
netns_kill_host 1 dtrain # the ranks; the host's MPI daemon lives on
check '[ "$($API wait "$E" 300)" = COMPLETED ]' \
    "the experiment completes after one host's processes died: $(tail -20 "$W/master.log")"
check '[ "$($API get "/api/v1/trials/$T" "r[\"trial\"][\"restarts\"]")" -eq 1 ]' "one restart expected"
$API get "/api/v1/trials/$T/logs" '"\n".join(l["line"] for l in r["logs"])' > "$W/logs" 2>&1
check 'grep -q "on node ${NETNS_ADDR[1]} exited on signal 9" "$W/logs"' \
    "the failed run names the host and the signal: $(grep -v "training:\|validation:" "$W/logs")"
check 'grep -q "run 1 ended with exit code [1-9]" "$W/logs"' "the failed run's exit code"
# run 2 goes on from a checkpoint (every 10 batches, taken at 20 or later): its first report
first=$(sed -n '/run 2 trained its first batch/,$p' "$W/logs" | grep -m1 -o "training: batch [0-9]*")
check '[ "${first##* }" -gt 20 ]' "the second run starts from the checkpoint: its first report: $first"
check '[ ! -e "$DTRAIN_HOME/runs/trial-$T.hosts" ]' "the run's hostfile is removed after the run"
summary
