# netns.sh — N test hosts on this machine, as network namespaces, for multi-host MPI tests.
# Sourced by a test script (bash); needs root and iproute2.
#
#   netns_up N     make hosts 0..N-1: namespace, veth onto a bridge of their own, an address in
#                  a /24 of 10.213.0.0/16 that exists only on that bridge (none on the way out),
#                  loopback up; the bridge's .1 in the root namespace (the master's address).
#                  Sets NETNS_ID, NETNS_NET (10.213.X.0/24), NETNS_GW (10.213.X.1),
#                  NETNS_ADDR[i], NETNS_NAME[i] (namespace), NETNS_HOST[i] (host name),
#                  NETNS_DIR (scratch: the rsh agent, a hostfile of all hosts), and exports the
#                  OpenMPI variables that make mpirun reach the hosts through the agent and keep
#                  its TCP (daemons and MPI traffic) on the bridge.
#   netns_hostfile FILE SLOTS   a hostfile of every host with SLOTS slots each
#   netns_kill_host I [COMM]    SIGKILL every process inside host I (its MPI daemon and
#                               ranks), or only those whose command name is COMM
#   netns_down     remove everything netns_up made (also run by the EXIT trap netns_up sets,
#                  so a failing test cleans up too; NETNS_ON_EXIT names a command of yours the
#                  trap runs first)
#
# Each run takes the first free X (the bridge's name dtnbX is the lock: `ip link add` of an
# existing name fails), so parallel runs never share names or addresses. The bridge's alias
# holds the owner's pid: a run killed by SIGKILL (no trap runs) is swept by the next netns_up.
# SIGINT, SIGTERM and SIGHUP end the script through the EXIT trap. Where the kernel
# refuses namespaces the script prints why and exits 77 (ctest's SKIP_RETURN_CODE).
#
# The rsh agent stands in for ssh: OpenMPI calls it as `agent HOST COMMAND...`; it runs the
# command with `sh -c` inside HOST's network namespace (nsenter, as netns_in), in a UTS namespace
# of its own with the host's name (so each host has its own host name, as machines do), with a clean environment (PATH,
# HOME only, as a fresh ssh login has): what a rank needs must be sent with mpirun -x. The
# sanitizers' settings of this test run (ASAN_OPTIONS, LSAN_OPTIONS, UBSAN_OPTIONS) stand for
# what a host's login profile sets and are kept.

NETNS_SKIP=77

netns_skip() {
    echo "SKIP: $*" >&2
    exit $NETNS_SKIP
}

# Remove what a run that died without its trap left: bridges dtnbX whose owner is gone.
netns_sweep() {
    local br x owner i
    for br in $(ip -o link show type bridge 2> /dev/null | awk -F': ' '{print $2}' | grep '^dtnb[0-9]*$'); do
        x=${br#dtnb}
        owner=$(ip -o link show "$br" | grep -o 'alias dtrain-netns [0-9]*' | awk '{print $3}')
        [ -n "$owner" ] && ! kill -0 "$owner" 2> /dev/null || continue
        for i in $(ip netns list | awk '{print $1}' | grep "^dtn${x}h[0-9]*$"); do
            local pids
            pids=$(ip netns pids "$i" 2> /dev/null)
            [ -z "$pids" ] || kill -9 $pids 2> /dev/null
            ip netns del "$i" 2> /dev/null
        done
        ip link del "$br" 2> /dev/null
        rm -rf /tmp/dtrain-netns-"$x".*
    done
}

# Run a command in namespace $1. nsenter rather than `ip netns exec` / `ip -n`: those also
# remount / and /sys, which fails where / is not a mount point (a chroot).
netns_in() {
    local ns=$1
    shift
    nsenter --net=/run/netns/"$ns" "$@"
}

netns_up() {
    local n=$1 i x
    [ "$(id -u)" = 0 ] || netns_skip "network namespaces need root (run the test as root)"
    command -v ip > /dev/null || netns_skip "no 'ip' (iproute2); hint: make test-deps"
    netns_sweep
    for x in $(seq 2 250); do
        if ip link add "dtnb$x" type bridge 2> /dev/null; then NETNS_ID=$x; break; fi
    done
    if [ -z "${NETNS_ID:-}" ]; then
        ip link add dtnbprobe type bridge 2> "/tmp/netns-probe.$$" ||
            netns_skip "the kernel refuses a bridge: $(cat "/tmp/netns-probe.$$")"
        ip link del dtnbprobe
        echo "FAIL: no free bridge name dtnb2..dtnb250" >&2
        exit 1
    fi
    ip link set "dtnb$NETNS_ID" alias "dtrain-netns $$"
    trap '${NETNS_ON_EXIT:-:}; netns_down' EXIT
    trap 'exit 1' INT TERM HUP
    local probe
    if ! probe=$(ip netns add "dtn${NETNS_ID}p" 2>&1); then
        netns_down
        trap - EXIT
        netns_skip "the kernel refuses network namespaces: $probe"
    fi
    ip netns del "dtn${NETNS_ID}p"
    NETNS_NET=10.213.$NETNS_ID.0/24
    NETNS_GW=10.213.$NETNS_ID.1
    NETNS_DIR=$(mktemp -d "/tmp/dtrain-netns-$NETNS_ID.XXXXXX")
    ip addr add "$NETNS_GW/24" dev "dtnb$NETNS_ID"
    ip link set "dtnb$NETNS_ID" up
    NETNS_ADDR=() NETNS_NAME=() NETNS_HOST=()
    for ((i = 0; i < n; i++)); do
        local ns=dtn${NETNS_ID}h$i veth=dtn${NETNS_ID}v$i
        NETNS_NAME[i]=$ns
        NETNS_HOST[i]=dtn$NETNS_ID-host$i
        NETNS_ADDR[i]=10.213.$NETNS_ID.$((10 + i))
        ip netns add "$ns"
        ip link add "$veth" type veth peer name eth0 netns "$ns"
        ip link set "$veth" master "dtnb$NETNS_ID" up
        netns_in "$ns" ip addr add "${NETNS_ADDR[i]}/24" dev eth0
        netns_in "$ns" ip link set eth0 up
        netns_in "$ns" ip link set lo up
        printf '%s %s %s\n' "${NETNS_ADDR[i]}" "$ns" "${NETNS_HOST[i]}" >> "$NETNS_DIR/hosts"
    done
    local keep="" v
    for v in ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS; do
        [ -z "${!v:-}" ] || keep="$keep $v=\"${!v}\""
    done
    cat > "$NETNS_DIR/rsh" << EOF
#!/bin/sh
# rsh agent for OpenMPI: run "\$2..." in the namespace of host \$1 (an address or a host name)
host=\$1; shift
echo "\$host" >> "$NETNS_DIR/rsh.log"
line=\$(awk -v h="\$host" '\$1 == h || \$3 == h' "$NETNS_DIR/hosts")
[ -n "\$line" ] || { echo "rsh: no test host \$host" >&2; exit 255; }
set -- "\$(echo "\$line" | cut -d' ' -f2)" "\$(echo "\$line" | cut -d' ' -f3)" "\$*"
exec nsenter --net=/run/netns/"\$1" unshare --uts sh -c 'hostname "\$0" && exec env -i PATH="$PATH" HOME="\$HOME" $keep sh -c "\$1"' "\$2" "\$3"
EOF
    chmod +x "$NETNS_DIR/rsh"
    export OMPI_MCA_plm_rsh_agent=$NETNS_DIR/rsh
    export OMPI_MCA_btl=self,vader,tcp
    export OMPI_MCA_btl_tcp_if_include=$NETNS_NET
    export OMPI_MCA_oob_tcp_if_include=$NETNS_NET
    # the bridge forwards between the hosts even where the firewall's FORWARD policy drops
    if [ -w /proc/sys/net/bridge/bridge-nf-call-iptables ] &&
        [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables)" = 1 ] &&
        command -v iptables > /dev/null; then
        iptables -I FORWARD -i "dtnb$NETNS_ID" -o "dtnb$NETNS_ID" -j ACCEPT 2> /dev/null &&
            NETNS_IPT=1
    fi
}

netns_hostfile() {
    local i
    : > "$1"
    for i in "${!NETNS_ADDR[@]}"; do echo "${NETNS_ADDR[i]} slots=$2" >> "$1"; done
}

netns_kill_host() {
    local pids p
    pids=$(ip netns pids "${NETNS_NAME[$1]}" 2> /dev/null)
    for p in $pids; do
        [ -z "${2:-}" ] || [ "$(cat "/proc/$p/comm" 2> /dev/null)" = "$2" ] || continue
        kill -9 "$p" 2> /dev/null
    done
}

netns_down() {
    [ -n "${NETNS_ID:-}" ] || return 0
    local ns i
    for i in "${!NETNS_NAME[@]}"; do # the root side of each pair: gone now, not later
        ip link del "dtn${NETNS_ID}v$i" 2> /dev/null
    done
    for ns in "${NETNS_NAME[@]}"; do
        for i in 1 2 3 4 5; do # processes first: a namespace with processes lingers
            local pids
            pids=$(ip netns pids "$ns" 2> /dev/null)
            [ -z "$pids" ] && break
            kill -9 $pids 2> /dev/null
            sleep 0.2
        done
        ip netns del "$ns" 2> /dev/null
    done
    [ -z "${NETNS_IPT:-}" ] ||
        iptables -D FORWARD -i "dtnb$NETNS_ID" -o "dtnb$NETNS_ID" -j ACCEPT 2> /dev/null
    ip link del "dtnb$NETNS_ID" 2> /dev/null
    [ -z "${NETNS_DIR:-}" ] || rm -rf "$NETNS_DIR"
    NETNS_ID=
}
