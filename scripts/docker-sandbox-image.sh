#!/usr/bin/env bash
# Build the sandbox.backend=docker image `ewa-sandbox:latest` locally, without a registry: the
# host's own /usr/bin/python3 (interpreter, shared libraries, stdlib) in an otherwise empty rootfs,
# imported with `docker import`. Same interpreter as the bwrap backend, so verdicts agree. Like the
# bwrap allow-list, the image holds nothing of the host but that interpreter and its libraries: no
# data, home or checkout (tests/test_sandbox_containment.py checks the image and a running container).
# Installs docker.io from apt and starts dockerd when needed (root). Idempotent: an image built from
# the same interpreter and this script is kept unless --force.
#   scripts/docker-sandbox-image.sh [--force] [--debootstrap]   (--debootstrap: a minimal Debian
#   rootfs with python3 from deb.debian.org instead; bigger and slower, independent of the host)
set -euo pipefail

IMAGE=${EWA_SANDBOX_IMAGE:-ewa-sandbox:latest}
PYTHON=${EWA_SANDBOX_PYTHON:-/usr/bin/python3}
DATA_ROOT=${EWA_DOCKER_DATA_ROOT:-} # empty: dockerd's default (/var/lib/docker)
TIMEOUT=${EWA_DOCKER_TIMEOUT:-60}
TOOLS="cat echo env false head ls printf sleep sort tail tr true wc"
force=0 method=host
for arg; do
  case $arg in
    --force) force=1 ;;
    --debootstrap) method=debootstrap ;;
    *) echo "usage: $0 [--force] [--debootstrap]" >&2; exit 2 ;;
  esac
done

die() { echo "docker-sandbox-image: error: $*" >&2; exit 1; }
log() { echo "docker-sandbox-image: $*" >&2; }
t0=$(date +%s.%N)
elapsed() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

apt_install() { # packages must not start services here (no init system): policy-rc.d says 101
  [ "$(id -u)" = 0 ] || die "need root to install $* (or install them yourself)"
  local apt=(apt-get -o DPkg::Lock::Timeout=300 -qq) policy=/usr/sbin/policy-rc.d restore=""
  apt-cache show "$1" >/dev/null 2>&1 || "${apt[@]}" update
  if [ -e "$policy" ]; then restore=$(mktemp); cp -p "$policy" "$restore"; fi
  printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"
  local rc=0
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "$@" >/dev/null || rc=$?
  rm -f "$policy"; [ -z "$restore" ] || mv "$restore" "$policy"
  ((rc == 0)) || die "apt-get install $* failed"
}

ensure_engine() {
  if docker info >/dev/null 2>&1; then return; fi
  command -v dockerd >/dev/null || { log "installing docker.io from apt"; apt_install docker.io; }
  [ "$(id -u)" = 0 ] || die "dockerd is not running and only root can start it"
  local args=() logf=/var/log/ewa-dockerd.log
  [ -z "$DATA_ROOT" ] || { mkdir -p "$DATA_ROOT"; args+=(--data-root "$DATA_ROOT"); }
  log "starting dockerd (log: $logf)"
  setsid dockerd "${args[@]}" >>"$logf" 2>&1 </dev/null &
  for _ in $(seq $((TIMEOUT * 5))); do docker info >/dev/null 2>&1 && return; sleep 0.2; done
  die "dockerd did not answer within ${TIMEOUT}s; last log lines: $(tail -n 3 "$logf" | tr '\n' ' ')"
}

copy_with_parents() { # copy files (symlinks resolved) to the same absolute path under $root
  local f
  for f; do
    mkdir -p "$root$(dirname "$f")"
    cp -L "$f" "$root$f"
  done
}

rootfs_host() {
  local real stdlib libs
  real=$(readlink -f "$PYTHON")
  [ -x "$real" ] || die "$PYTHON is not an executable interpreter"
  stdlib=$("$real" -S -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
  copy_with_parents "$real"
  ln -s "$(basename "$real")" "$root/usr/bin/python3"
  mkdir -p "$root/usr/local/bin"; ln -s /usr/bin/python3 "$root/usr/local/bin/python3"
  # The stdlib without its test suite and GUI/packaging tools; pyc caches kept (faster start-up).
  mkdir -p "$root$stdlib"
  tar -C "$stdlib" -ch --exclude=./test --exclude=./idlelib --exclude=./tkinter \
    --exclude=./turtledemo --exclude=./ensurepip --exclude=./lib2to3 --exclude=./dist-packages \
    --exclude=./site-packages . | tar -C "$root$stdlib" -x
  # /bin/sh and a few coreutils (os.system, subprocess in model code behave as under bwrap), then
  # the shared libraries of all of them and of the interpreter's extension modules.
  local tools=() t
  for t in $TOOLS; do t=$(type -P "$t") && tools+=("$(readlink -f "$t")"); done
  copy_with_parents /bin/sh "${tools[@]}"
  for t in "${tools[@]}"; do [ -e "$root/usr/bin/$(basename "$t")" ] || ln -s "$t" "$root/usr/bin/$(basename "$t")"; done
  libs=$(ldd "$real" "$root$stdlib"/lib-dynload/*.so /bin/sh "${tools[@]}" 2>/dev/null |
    awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $1 !~ /:$/ {print $1}' | sort -u)
  # shellcheck disable=SC2086
  copy_with_parents $libs
  [ -e "$root/lib64" ] || [ ! -e /lib64 ] || copy_with_parents /lib64/ld-linux-x86-64.so.2
}

rootfs_debootstrap() {
  command -v debootstrap >/dev/null || { log "installing debootstrap from apt"; apt_install debootstrap; }
  local suite
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  debootstrap --variant=minbase --include=python3 "$suite" "$root" http://deb.debian.org/debian >/dev/null ||
    die "debootstrap failed"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  mkdir -p "$root/usr/local/bin"; ln -sf /usr/bin/python3 "$root/usr/local/bin/python3"
}

fingerprint() {
  { sha256sum "$0"; echo "$method"
    [ "$method" = debootstrap ] || { readlink -f "$PYTHON"; "$PYTHON" -VV; sha256sum "$(readlink -f "$PYTHON")"; }
  } | sha256sum | cut -c1-16
}

ensure_engine
fp=$(fingerprint)
if ((!force)) && [ "$(docker image inspect -f '{{index .Config.Labels "ewa.fingerprint"}}' "$IMAGE" 2>/dev/null)" = "$fp" ]; then
  log "$IMAGE is up to date (fingerprint $fp)"
else
  root=$(mktemp -d "${TMPDIR:-/tmp}/ewa-sandbox-rootfs.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  "rootfs_$method"
  mkdir -p "$root/tmp" "$root/dev" "$root/proc" "$root/etc"
  chmod 1777 "$root/tmp"
  # Model code runs as an unprivileged uid (65534 - worker); names make `id` and `getpass` behave.
  [ "$method" = debootstrap ] || {
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  }
  old=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
  tar -C "$root" --numeric-owner -c . |
    docker import --change "LABEL ewa.fingerprint=$fp" --change "LABEL ewa.rootfs=$method" --change 'ENV LANG=C.UTF-8' \
      --change 'WORKDIR /tmp' --change 'CMD ["/usr/bin/python3"]' - "$IMAGE" >/dev/null
  [ -z "$old" ] || docker rmi "$old" >/dev/null 2>&1 || true # the replaced build, unless still in use
  log "built $IMAGE from $method rootfs in $(elapsed) s ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.1f MB", $1/1e6}'))"
fi

# The limits the docker backend runs under must work with this image on this engine.
out=$(docker run --rm --network none --read-only --memory 256m --memory-swap 256m --pids-limit 64 \
  --cap-drop ALL --security-opt no-new-privileges --user 65534:65534 "$IMAGE" \
  /usr/local/bin/python3 -c 'import json, resource, signal, select; print(1)') ||
  die "$IMAGE does not run python3 under --network none --read-only --memory 256m --pids-limit 64"
[ "$out" = 1 ] || die "$IMAGE printed '$out' instead of 1"
# The fork server itself must start there: it refuses to run unless its seccomp filter installs under
# the engine's own profile. Its hello is a 4-byte length, then JSON.
server=$(dirname "$0")/../src/ewa/sandbox/forkserver.py
hello=$(docker run --rm -i --network none --read-only --tmpfs /tmp:rw,mode=1777 --cap-drop ALL \
  --security-opt no-new-privileges --user 65534:65534 --workdir /tmp "$IMAGE" \
  /usr/local/bin/python3 -s -B -c "$(cat "$server")" --scratch /tmp </dev/null | tail -c +5) ||
  die "$IMAGE does not run the sandbox's fork server (its error is above)"
grep -q '"seccomp":true' <<<"$hello" || die "the fork server does not start in $IMAGE: $hello"
log "ok: $IMAGE runs python3 and the fork server (seccomp on) with --network none --read-only --memory 256m --pids-limit 64 ($(elapsed) s total)"
