#!/usr/bin/env bash
# A real two-node Slurm cluster on this one machine, for testing `grader grade --slurm` (CI runs it).
#
#   scripts/ci/slurm_cluster.sh start    install the packages if missing, write the config, start munged,
#                                     slurmctld and two slurmd (n1, n2), wait until both nodes are idle
#   scripts/ci/slurm_cluster.sh status   print the daemons and `sinfo`; exit 0 only when all are up
#   scripts/ci/slurm_cluster.sh stop     cancel every job, wait for the queue to drain, stop the daemons
#
# No systemd: munged runs as the munge user, slurmctld and slurmd with -D in the background, and stop
# kills them by the pids recorded at start. Each node has two fake GPUs (character devices like
# /dev/null), so tasks asking for --gres=gpu:1 are scheduled and get CUDA_VISIBLE_DEVICES. Needs root.
# Refuses to overwrite a slurm.conf it did not write. State lives in $GRADER_SLURM_DIR.
set -euo pipefail

STATE=${GRADER_SLURM_DIR:-/tmp/grader-slurm}
CONF_DIR=/etc/slurm
MARKER="# written by scripts/ci/slurm_cluster.sh"
CTLD_PORT=${GRADER_SLURM_PORT:-16817}         # nodes listen on the next two ports
NODES=(n1 n2)
GPUS_PER_NODE=2

say() { echo "slurm_cluster: $*" >&2; }
alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

install_packages() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
        && command -v munged >/dev/null; then
        return
    fi
    say "installing slurmctld slurmd slurm-client munge"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
}

write_config() {
    local conf=$CONF_DIR/slurm.conf host cpus memory
    if [[ -e $conf ]] && ! grep -qF "$MARKER" "$conf"; then
        say "$conf exists and was not written by this script: not touching a real cluster's config"
        exit 1
    fi
    host=$(hostname -s)
    cpus=$(nproc)
    (( cpus < 2 )) && cpus=2
    memory=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 4 ))
    mkdir -p "$CONF_DIR" "$STATE"/{ctld,log,pid,dev} "$STATE"/spool
    {
        echo "$MARKER"
        echo "ClusterName=grader-ci"
        echo "SlurmctldHost=$host(127.0.0.1)"
        echo "SlurmctldPort=$CTLD_PORT"
        echo "SlurmUser=root"
        echo "AuthType=auth/munge"
        echo "StateSaveLocation=$STATE/ctld"
        echo "SlurmctldPidFile=$STATE/pid/slurmctld.daemon.pid"
        echo "SlurmctldLogFile=$STATE/log/slurmctld.log"
        echo "SlurmdSpoolDir=$STATE/spool/%n"
        echo "SlurmdPidFile=$STATE/pid/slurmd-%n.daemon.pid"
        echo "SlurmdLogFile=$STATE/log/slurmd-%n.log"
        echo "SlurmdParameters=config_overrides"     # trust the CPUs below, not the shared hardware
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "SchedulerType=sched/backfill"
        echo "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0"   # an 8-task array: 2-4 s, not 5-12 s
        echo "AccountingStorageType=accounting_storage/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "JobCompType=jobcomp/none"
        echo "MpiDefault=none"
        echo "PropagateResourceLimits=NONE"
        echo "ReturnToService=2"
        echo "KillWait=5"
        echo "SlurmctldTimeout=30"
        echo "SlurmdTimeout=30"
        echo "GresTypes=gpu"
        local index=1 node
        for node in "${NODES[@]}"; do
            echo "NodeName=$node NodeHostname=$host NodeAddr=127.0.0.1 Port=$((CTLD_PORT + index))" \
                 "CPUs=$cpus RealMemory=$memory Gres=gpu:$GPUS_PER_NODE State=UNKNOWN"
            index=$((index + 1))
        done
        echo "PartitionName=ci Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP"
    } > "$conf.new"
    mv "$conf.new" "$conf"
    # Fake GPUs: gres.conf refuses plain files, so each is a character device (the numbers of /dev/null).
    {
        echo "$MARKER"
        echo "AutoDetect=off"
        for node in "${NODES[@]}"; do
            local gpu
            for (( gpu = 0; gpu < GPUS_PER_NODE; gpu++ )); do
                [[ -c $STATE/dev/$node-gpu$gpu ]] || mknod "$STATE/dev/$node-gpu$gpu" c 1 3
            done
            echo "NodeName=$node Name=gpu File=$STATE/dev/$node-gpu[0-$((GPUS_PER_NODE - 1))]"
        done
    } > "$CONF_DIR/gres.conf.new"
    mv "$CONF_DIR/gres.conf.new" "$CONF_DIR/gres.conf"
}

start_munge() {
    if alive /run/munge/munged.pid; then
        return
    fi
    mkdir -p /run/munge /var/lib/munge /var/log/munge /etc/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    chmod 0755 /run/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
            || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
    runuser -u munge -- /usr/sbin/munged      # daemonizes and writes /run/munge/munged.pid
}

start_daemons() {
    local node
    if ! alive "$STATE/pid/slurmctld.pid"; then
        # -c: forget jobs of an earlier run; -i: start even if that state is unreadable.
        /usr/sbin/slurmctld -D -c -i >>"$STATE/log/slurmctld.stdout" 2>&1 &
        echo $! > "$STATE/pid/slurmctld.pid"
    fi
    for node in "${NODES[@]}"; do
        mkdir -p "$STATE/spool/$node"
        if ! alive "$STATE/pid/slurmd-$node.pid"; then
            /usr/sbin/slurmd -D -N "$node" >>"$STATE/log/slurmd-$node.stdout" 2>&1 &
            echo $! > "$STATE/pid/slurmd-$node.pid"
        fi
    done
}

nodes_ready() {
    # Both nodes answer and take jobs (idle, or busy with one already).
    local states
    states=$(sinfo -h -N -o "%N %t" 2>/dev/null | sort -u) || return 1
    [[ $(grep -cE " (idle|mix|alloc)$" <<<"$states") -eq ${#NODES[@]} ]]
}

wait_ready() {
    local tries
    for (( tries = 0; tries < 120; tries++ )); do
        nodes_ready && return 0
        if (( tries % 20 == 19 )); then     # a node left down by an earlier run: put it back
            scontrol update nodename="$(IFS=,; echo "${NODES[*]}")" state=resume >/dev/null 2>&1 || true
        fi
        sleep 0.5
    done
    say "nodes did not become idle in 60 s:"
    sinfo -N >&2 || true
    tail -n 20 "$STATE"/log/*.log >&2 || true
    return 1
}

start() {
    install_packages
    write_config
    start_munge
    start_daemons
    wait_ready
    say "up: $(sinfo -h -N -o '%N %t %G' | sort -u | tr '\n' ' ')"
}

status() {
    local ok=0 name
    for name in slurmctld "${NODES[@]/#/slurmd-}"; do
        if alive "$STATE/pid/$name.pid"; then
            echo "$name: running (pid $(cat "$STATE/pid/$name.pid"))"
        else
            echo "$name: stopped"; ok=1
        fi
    done
    alive /run/munge/munged.pid && echo "munged: running" || { echo "munged: stopped"; ok=1; }
    (( ok == 0 )) && sinfo -N 2>/dev/null
    (( ok == 0 )) && nodes_ready
}

stop_pid() {
    local file=$1 pid tries
    alive "$file" || { rm -f "$file"; return 0; }
    pid=$(cat "$file")
    kill -TERM "$pid" 2>/dev/null || true
    for (( tries = 0; tries < 50; tries++ )); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$file"
}

stop() {
    local tries
    if alive "$STATE/pid/slurmctld.pid"; then
        # Job processes outlive slurmd: cancel them and let the nodes reap them before the daemons go.
        squeue -h -o %A | sort -u | xargs -r scancel --full 2>/dev/null || true
        for (( tries = 0; tries < 60; tries++ )); do
            [[ -z $(squeue -h -o %A 2>/dev/null) ]] && break
            sleep 0.5
        done
    fi
    local node
    for node in "${NODES[@]}"; do
        stop_pid "$STATE/pid/slurmd-$node.pid"
    done
    stop_pid "$STATE/pid/slurmctld.pid"
    stop_pid /run/munge/munged.pid
    say "stopped"
}

case ${1:-} in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
