#!/usr/bin/env bash
# A multi-host crawlfleet cluster on one machine, in Linux network namespaces: one namespace per
# host, each host's links veth pairs onto bridges in a switch namespace of their own (nothing is
# added to the root namespace), addresses from the benchmarking range 198.18.0.0/15.
#
#   host      cluster network (198.18.0.0/16)   web network (198.19.0.0/16)
#   mn        198.18.0.1   multinode scheduler (nodes on :14100, XML-RPC on :14101)
#   node1     198.18.0.11                       198.19.0.11   node scheduler
#   node2     198.18.0.12                       198.19.0.12   node scheduler
#   dup       198.18.0.21  duplicate server (:14200), forwarding to the replica
#   replica   198.18.0.22  duplicate server replica (:14200), which the nodes fail over to
#   web                                         198.19.0.30   the synthetic web, site i on
#                                                             198.19.1.i port 80
#
# Usage: scripts/netns-cluster.sh [OPTIONS] COMMAND
#   up [--detach]     lay out the hosts and start every role; the collection (the synthetic web)
#                     starts crawling at once. Without --detach it stays in the foreground and
#                     removes everything on Ctrl-C; with it, it returns once every role runs.
#   down              SIGKILL every process in the cluster's namespaces, delete the namespaces
#                     (with them every link and bridge) and nothing else; the data stays in DIR.
#   partition HOST [cluster|web|all]   set HOST's link(s) down on the switch side: its packets
#                     go nowhere and its sockets stay open (default: its cluster link; the web
#                     host's web link). A node partitioned from the cluster still reaches the web.
#   heal HOST [cluster|web|all]        set them up again.
#   kill ROLE         SIGKILL a role (mn, node1, node2, dup, replica, web).
#   start ROLE        start a role again on its data directory, as an operator would.
#   status            the roles and their pids, the links and their state.
#
# Options (or the environment variable named after each):
#   --name N    NETNS_CLUSTER_NAME, default cf: namespaces are N-sw, N-mn, N-node1, ...
#   --dir D     NETNS_CLUSTER_DIR, default /tmp/crawlfleet-netns-N: data directories, role logs
#               (ROLE.log), pids, the synthetic web's access log (access.log) and collection
#   --bin B     CRAWLFLEET_BIN: the crawlfleet executable (default: `cargo build --release`, then
#               target/release/crawlfleet)
#   --web H:P   NETNS_CLUSTER_WEB, default 6:60: the synthetic web, HOSTS:PAGES
#   --delay S   NETNS_CLUSTER_DELAY, default 0.1: seconds between two requests to one site
#   NETNS_CLUSTER_DUP_KEEPALIVE (default 1): the nodes' duplicate server keep-alive, in seconds;
#               a node fails over to the replica after a few silent intervals
#   NETNS_CLUSTER_NETEM (default empty), e.g. "delay 2ms 1ms loss 0.1%": tc netem on every host
#               link, added only where the kernel has netem (the script says when it does not)
#
# Needs root (network namespaces) and iproute2: exits 77 saying so otherwise, and 78 when the
# kernel refuses network namespaces. Every command but `up` leaves the cluster as it is; `up`
# removes what it made when it fails or, in the foreground, when stopped.
set -euo pipefail

NAME=${NETNS_CLUSTER_NAME:-cf}
DIR=${NETNS_CLUSTER_DIR:-}
BIN=${CRAWLFLEET_BIN:-}
WEB=${NETNS_CLUSTER_WEB:-6:60}
DELAY=${NETNS_CLUSTER_DELAY:-0.1}
DUP_KEEPALIVE=${NETNS_CLUSTER_DUP_KEEPALIVE:-1}
NETEM=${NETNS_CLUSTER_NETEM:-}
COLLECTION=netnsweb
ROLES="web replica dup mn node1 node2"

die() {
  echo "netns-cluster.sh: $*" >&2
  exit 1
}

while [ $# -gt 0 ]; do
  case $1 in
    --name) NAME=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --web) WEB=$2; shift 2 ;;
    --delay) DELAY=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || die "no command (up, down, partition, heal, kill, start, status; --help)"
cmd=$1
shift
DIR=${DIR:-/tmp/crawlfleet-netns-$NAME}
[[ $NAME =~ ^[A-Za-z0-9_]{1,24}$ ]] || die "--name must be letters, digits or _ (at most 24)"

if [ "$(id -u)" -ne 0 ]; then
  echo "netns-cluster.sh needs root: it creates network namespaces, veth pairs and bridges" >&2
  exit 77
fi
command -v ip >/dev/null || { echo "netns-cluster.sh needs iproute2 (ip)" >&2; exit 77; }

ns() { echo "$NAME-$1"; }
sw=$(ns sw)

cluster_ip() {
  case $1 in
    mn) echo 198.18.0.1 ;; node1) echo 198.18.0.11 ;; node2) echo 198.18.0.12 ;;
    dup) echo 198.18.0.21 ;; replica) echo 198.18.0.22 ;; *) ;;
  esac
}
web_ip() {
  case $1 in
    node1) echo 198.19.0.11 ;; node2) echo 198.19.0.12 ;; web) echo 198.19.0.30 ;; *) ;;
  esac
}
# The links of a host: "net interface-in-host" pairs (the switch side is named net-host).
links() {
  local i=0
  if [ -n "$(cluster_ip "$1")" ]; then echo "c eth$i"; i=$((i + 1)); fi
  if [ -n "$(web_ip "$1")" ]; then echo "w eth$i"; fi
}

# Every pid in the cluster's namespaces (the roles, and whatever else runs there).
cluster_pids() {
  local n
  for n in $(ip netns list | awk '{print $1}' | grep -E "^$NAME-(sw|$(echo $ROLES | tr ' ' '|'))$"); do
    ip netns pids "$n" 2>/dev/null || true
  done
}

down() {
  local pids n
  pids=$(cluster_pids)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
    for _ in $(seq 50); do
      [ -z "$(cluster_pids)" ] && break
      sleep 0.1
    done
  fi
  for n in $ROLES sw; do
    ip netns del "$(ns "$n")" 2>/dev/null || true
  done
  rm -f "$DIR"/*.pid 2>/dev/null || true
}

net_up() {
  if ! ip netns add "$sw" 2>/dev/null; then
    echo "netns-cluster.sh: the kernel refuses network namespaces here" >&2
    exit 78
  fi
  ip -n "$sw" link set lo up
  for net in c w; do
    ip -n "$sw" link add "br-$net" type bridge
    ip -n "$sw" link set "br-$net" up
  done
  local h net dev ip hosts netem_ok=1
  for h in $ROLES; do
    ip netns add "$(ns "$h")"
    ip -n "$(ns "$h")" link set lo up
    while read -r net dev; do
      ip -n "$sw" link add "$net-$h" type veth peer name "$dev" netns "$(ns "$h")"
      ip -n "$sw" link set "$net-$h" master "br-$net" up
      if [ "$net" = c ]; then ip=$(cluster_ip "$h"); else ip=$(web_ip "$h"); fi
      ip -n "$(ns "$h")" addr add "$ip/16" dev "$dev"
      ip -n "$(ns "$h")" link set "$dev" up
      if [ -n "$NETEM" ] && [ $netem_ok = 1 ]; then
        # shellcheck disable=SC2086
        if ! tc -n "$(ns "$h")" qdisc add dev "$dev" root netem $NETEM 2>/dev/null; then
          echo "netns-cluster.sh: tc netem is not available here: no delay or loss added" >&2
          netem_ok=0
        fi
      fi
    done < <(links "$h")
  done
  # The synthetic web's sites: the i-th address from 198.19.1.1 (synthweb skips .0 and .255).
  hosts=${WEB%%:*}
  [ "$hosts" -ge 1 ] && [ "$hosts" -le 254 ] || die "--web: 1 to 254 hosts"
  for i in $(seq 1 "$hosts"); do
    ip -n "$(ns web)" addr add "198.19.1.$i/16" dev eth0
  done
}

set_links() { # HOST up|down [cluster|web|all]
  local h=$1 state=$2 which=${3:-} net dev done=0
  [ -n "$which" ] || { [ "$h" = web ] && which=web || which=cluster; }
  ip netns list | grep -q "^$(ns "$h")\b" || die "no host $h in cluster $NAME"
  while read -r net dev; do
    case $which/$net in
      all/* | cluster/c | web/w) ip -n "$sw" link set "$net-$h" "$state"; done=1 ;;
      *) ;;
    esac
  done < <(links "$h")
  [ $done = 1 ] || die "host $h has no $which link"
}

# The collection: the synthetic web's, with the delay and the duplicate server and its replica.
write_collection() {
  local ppdup
  ppdup='    <section name="ppdup"><attrib name="dupservers" type="list-string"><member>198.18.0.21:14200</member></attrib><attrib name="replicas" type="list-string"><member>198.18.0.22:14200</member></attrib></section>'
  sed -e "s|<attrib name=\"delay\" type=\"real\">0</attrib>|<attrib name=\"delay\" type=\"real\">$DELAY</attrib>|" \
    -e "s|^  </DomainSpecification>|$ppdup\n  </DomainSpecification>|" \
    "$DIR/web.xml" >"$DIR/collection.xml"
  grep -q dupservers "$DIR/collection.xml" || die "could not write $DIR/collection.xml"
}

# The admin ports listen on the cluster network, off loopback, where a token is required
# (docs/admin.md): one random token for the cluster, kept in DIR/admin.token (`crawlfleet admin
# --token-file DIR/admin.token --server 198.18.0.1:14101 ...` from inside the mn namespace).
admin_token() {
  if [ ! -s "$DIR/admin.token" ]; then
    (umask 077 && head -c 24 /dev/urandom | base64 >"$DIR/admin.token")
  fi
  echo "$DIR/admin.token"
}

start_role() {
  local role=$1 args
  case $role in
    web) args=(synthweb --web "$WEB" --base 198.19.1.1 --port 80 --access-log "$DIR/access.log"
      --collection "$DIR/web.xml" --collection-name "$COLLECTION") ;;
    replica) args=(dupreplica --listen 198.18.0.22:14200 --data-dir "$DIR/replica") ;;
    dup) args=(dupserver --listen 198.18.0.21:14200 --data-dir "$DIR/dup"
      --replica 198.18.0.22:14200) ;;
    mn) args=(multinode --listen 198.18.0.1:14100 --admin 198.18.0.1:14101 --data-dir "$DIR/mn"
      --admin-token-file "$(admin_token)" --config "$DIR/collection.xml") ;;
    node1 | node2) args=(node --node-id "$role" --multinode 198.18.0.1:14100
      --admin "$(cluster_ip "$role"):14111" --admin-token-file "$(admin_token)" --data-dir "$DIR/$role"
      --dup-keepalive "$DUP_KEEPALIVE" --quarantine-interval 1 --stats-interval 1) ;;
    *) die "no role $role (one of: $ROLES)" ;;
  esac
  if [ -e "$DIR/$role.pid" ] && kill -0 "$(cat "$DIR/$role.pid")" 2>/dev/null; then
    die "$role is running already"
  fi
  : >"$DIR/$role.out"
  # `ip netns exec` execs the role, so $! is the role's pid.
  RUST_LOG=${RUST_LOG:-warn} ip netns exec "$(ns "$role")" "$BIN" "${args[@]}" \
    >"$DIR/$role.out" 2>>"$DIR/$role.log" </dev/null &
  echo $! >"$DIR/$role.pid"
  # Each role prints one line once it listens (or, for a node, once it started).
  for _ in $(seq 100); do
    [ -s "$DIR/$role.out" ] && return 0
    kill -0 "$(cat "$DIR/$role.pid")" 2>/dev/null || break
    sleep 0.1
  done
  die "$role did not start; see $DIR/$role.log"
}

kill_role() {
  local role=$1 pid
  [ -e "$DIR/$role.pid" ] || die "$role was not started"
  pid=$(cat "$DIR/$role.pid")
  # Only a process in the role's namespace: a stale pid file must not kill anything else.
  ip netns pids "$(ns "$role")" 2>/dev/null | grep -qx "$pid" || die "$role is not running"
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$DIR/$role.pid"
}

find_bin() {
  if [ -z "$BIN" ]; then
    cd "$(dirname "$0")/.."
    cargo build --release --quiet -p crawlfleet
    BIN=$(pwd)/target/release/crawlfleet
    cd - >/dev/null
  fi
  [ -x "$BIN" ] || die "$BIN is not an executable"
  BIN=$(realpath "$BIN")
}

up() {
  local detach=0
  [ "${1:-}" = --detach ] && detach=1
  find_bin
  mkdir -p "$DIR"
  DIR=$(realpath "$DIR")
  # Before the trap below: a second `up` must leave the cluster that runs alone.
  if ip netns list | grep -q "^$sw\b"; then
    die "a cluster named $NAME is up already (down first)"
  fi
  # From here on, a failure (or Ctrl-C) removes what was made.
  trap 'down' EXIT
  trap 'exit 130' INT TERM
  net_up
  start_role web
  write_collection
  start_role replica
  start_role dup
  start_role mn
  start_role node1
  start_role node2
  echo "cluster $NAME up: crawling $WEB (sites 198.19.1.1-) from node1 and node2; data in $DIR"
  if [ $detach = 1 ]; then
    trap - EXIT
    return 0
  fi
  echo "Ctrl-C stops it and removes the namespaces"
  while :; do sleep 1; done
}

case $cmd in
  up) up "$@" ;;
  down) down ;;
  partition) [ $# -ge 1 ] || die "partition HOST"; set_links "$1" down "${2:-}" ;;
  heal) [ $# -ge 1 ] || die "heal HOST"; set_links "$1" up "${2:-}" ;;
  kill) [ $# -eq 1 ] || die "kill ROLE"; kill_role "$1" ;;
  start)
    [ $# -eq 1 ] || die "start ROLE"
    find_bin
    DIR=$(realpath "$DIR")
    start_role "$1"
    ;;
  status)
    for r in $ROLES; do
      pid=$(cat "$DIR/$r.pid" 2>/dev/null || true)
      if [ -n "$pid" ] && ip netns pids "$(ns "$r")" 2>/dev/null | grep -qx "$pid"; then
        echo "$r running (pid $pid)"
      else
        echo "$r not running"
      fi
    done
    ip -n "$sw" -br link show type veth 2>/dev/null || echo "cluster $NAME is down"
    ;;
  *) die "unknown command $cmd" ;;
esac
