# lib.sh - a private Docker daemon for building and testing the image on a
# machine without a registry (sourced by docker/build and tests/docker/run).
#
# dk_start starts dockerd with its own data root, exec root and socket under
# a state directory of its own (DK_DIR, default /tmp/outbox-relay-docker.PID),
# without touching the host's network (no iptables rules, no bridge, no
# ip_forward), and exports DOCKER_HOST. dk_base imports a Debian base image
# made with debootstrap as local/debian:SUITE; dk_stop removes every
# container, stops the daemon (and the containerd it started), unmounts what
# it mounted and removes the state directory. Callers run dk_stop from an
# EXIT trap so that a failure never leaves a daemon running; a run killed
# outright (SIGKILL) is cleaned up by the next dk_start (dk_reap_stale).
#
# The debootstrap tarball is cached in DK_CACHE (default
# /var/cache/outbox-relay/docker) for DK_BASE_MAX_AGE_DAYS (default 7): it is
# only the Debian minbase system as debootstrap verified it, and the image
# build upgrades its packages from the mirror anyway. DK_CACHE= (empty)
# disables the cache.
#
# SPDX-License-Identifier: Apache-2.0

DK_DIR=${DK_DIR:-/tmp/outbox-relay-docker.$$}
DK_CACHE=${DK_CACHE-/var/cache/outbox-relay/docker}
DK_BASE_MAX_AGE_DAYS=${DK_BASE_MAX_AGE_DAYS:-7}
DK_SUITE=${DK_SUITE:-bookworm}
DK_MIRROR=${DK_MIRROR:-http://deb.debian.org/debian}
# Debian's own client: with BuildKit it builds faster than the legacy
# builder of /usr/local/bin/docker (which has no buildx).
DK_DOCKER=${DK_DOCKER:-/usr/bin/docker}
dk_started=0

dk_log() { printf '%s: %s\n' "${DK_PROG:-docker}" "$*" >&2; }
dk_die() {
        dk_log "error: $*"
        exit 1
}

docker() { DOCKER_BUILDKIT=1 "$DK_DOCKER" "$@"; }

# dk_install [PACKAGE...]: docker.io, debootstrap and these, when missing.
dk_install() {
        local -a missing=()
        local pkg
        for pkg in docker.io debootstrap "$@"; do
                dpkg-query -W -f='${Status}\n' "$pkg" 2>/dev/null | grep -q '^install ok installed$' ||
                        missing+=("$pkg")
        done
        [ "${#missing[@]}" -eq 0 ] && return 0
        [ "$(id -u)" -eq 0 ] || dk_die "installing ${missing[*]} needs root"
        dk_log "installing ${missing[*]}"
        apt-get -q update >/dev/null &&
                DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Use-Pty=0 \
                        -o DPkg::Lock::Timeout=300 --no-install-recommends "${missing[@]}" >/dev/null ||
                dk_die "apt-get could not install ${missing[*]}"
}

# dk_reap_stale: stop the daemons of earlier runs that were killed before
# their dk_stop could run (their /tmp/outbox-relay-docker.PID has no PID).
dk_reap_stale() {
        local d owner
        for d in /tmp/outbox-relay-docker.*; do
                [ -d "$d" ] || continue
                owner=${d##*.}
                case $owner in '' | *[!0-9]*) continue ;; esac
                kill -0 "$owner" 2>/dev/null && continue
                dk_log "stopping what a killed run left in $d"
                (
                        DK_DIR=$d
                        dk_started=1
                        export DOCKER_HOST="unix://$d/docker.sock"
                        dk_stop
                ) || true
        done
}

dk_start() {
        [ "$(id -u)" -eq 0 ] || dk_die "a private dockerd needs root"
        dk_reap_stale
        [ ! -e "$DK_DIR" ] || dk_die "$DK_DIR exists: another run uses it, or remove it"
        mkdir -p "$DK_DIR"
        dk_started=1
        # Its own containerd too (dockerd starts one under the exec root
        # when none is given), so nothing is shared with another daemon.
        dockerd --data-root "$DK_DIR/data" --exec-root "$DK_DIR/exec" \
                --pidfile "$DK_DIR/dockerd.pid" -H "unix://$DK_DIR/docker.sock" \
                --iptables=false --ip6tables=false --bridge=none --ip-forward=false \
                >"$DK_DIR/dockerd.log" 2>&1 &
        export DOCKER_HOST="unix://$DK_DIR/docker.sock"
        local i
        for i in $(seq 120); do
                docker version >/dev/null 2>&1 && return 0
                sleep 0.5
        done
        tail -n 20 "$DK_DIR/dockerd.log" >&2
        dk_die "dockerd did not answer within 60 s (log above)"
}

dk_stop() {
        [ "$dk_started" -eq 1 ] || return 0
        dk_started=0
        local pid i f
        if [ -S "$DK_DIR/docker.sock" ]; then
                # Failed builds leave intermediate containers behind.
                docker ps -aq 2>/dev/null | xargs -r "$DK_DOCKER" rm -f >/dev/null 2>&1 || true
        fi
        # Both pids first: dockerd removes containerd's pidfile as it stops it.
        local -a pids=()
        for f in "$DK_DIR/dockerd.pid" "$DK_DIR/exec/containerd/containerd.pid"; do
                pid=$(cat "$f" 2>/dev/null || true)
                [ -n "$pid" ] && pids+=("$pid")
        done
        for pid in "${pids[@]}"; do
                kill -0 "$pid" 2>/dev/null || continue
                kill -TERM "$pid" 2>/dev/null || true
                for i in $(seq 60); do
                        kill -0 "$pid" 2>/dev/null || break
                        sleep 0.5
                done
                kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
        done
        # Whatever is still mounted under the state directory (netns, overlays).
        local m
        for m in $(grep -o " $DK_DIR/[^ ]*" /proc/self/mounts | sort -r || true); do
                umount -l "$m" 2>/dev/null || true
        done
        rm -rf "$DK_DIR" || dk_log "could not remove $DK_DIR"
        unset DOCKER_HOST
}

# dk_base: local/debian:$DK_SUITE, a debootstrap minbase system with the
# host's apt sources.
dk_base() {
        local tar="$DK_DIR/base.tar" cached=
        [ -n "$DK_CACHE" ] && cached="$DK_CACHE/$DK_SUITE-minbase.tar"
        if [ -n "$cached" ] && [ -f "$cached" ] &&
                [ -z "$(find "$cached" -mtime +"$DK_BASE_MAX_AGE_DAYS")" ]; then
                dk_log "base image from $cached"
                tar="$cached"
        else
                local r="$DK_DIR/rootfs"
                dk_log "debootstrap --variant=minbase $DK_SUITE"
                debootstrap --variant=minbase "$DK_SUITE" "$r" "$DK_MIRROR" >"$DK_DIR/debootstrap.log" 2>&1 || {
                        tail -n 20 "$DK_DIR/debootstrap.log" >&2
                        dk_die "debootstrap failed (log above)"
                }
                rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/* \
                        "$r/etc/apt/sources.list"
                if [ -f /etc/apt/sources.list.d/debian.sources ] && [ "$DK_SUITE" = bookworm ]; then
                        cp /etc/apt/sources.list.d/debian.sources "$r/etc/apt/sources.list.d/"
                else
                        echo "deb $DK_MIRROR $DK_SUITE main" >"$r/etc/apt/sources.list"
                fi
                : >"$r/etc/resolv.conf"
                tar -C "$r" -cf "$tar" .
                rm -rf "$r"
                if [ -n "$cached" ] && mkdir -p "$DK_CACHE" 2>/dev/null; then
                        cp "$tar" "$cached.tmp" && mv "$cached.tmp" "$cached"
                fi
        fi
        docker import -c 'CMD ["/bin/bash"]' "$tar" "local/debian:$DK_SUITE" >/dev/null ||
                dk_die "docker import failed"
}

# dk_build TAG: build docker/Dockerfile from the repository at $PWD on the
# local base; prints the image size in bytes on stdout.
dk_build() {
        local tag=$1
        docker build --progress=plain --network host --build-arg "BASE=local/debian:$DK_SUITE" \
                -f docker/Dockerfile -t "$tag" . >"$DK_DIR/build.log" 2>&1 || {
                tail -n 60 "$DK_DIR/build.log" >&2
                dk_die "docker build failed (log above)"
        }
        docker image inspect -f '{{.Size}}' "$tag"
}
