#!/usr/bin/env bash
# Runs a command inside the Debian sid root filesystem (hipcc 7.0.2, HIP 6.4.3), in a private
# mount namespace, so that no mount leaks out or clashes with another run:
#   - /proc mounted (hipcc 7 reads /proc/self/exe), a fresh tmpfs on /tmp and /dev/shm;
#   - the repository root bind-mounted at its own path, and each --bind DIR likewise;
#   - the working directory kept (it must lie inside one of the bind mounts);
#   - the environment cleared to PATH, HOME, LANG (and TERM when set), plus each -e NAME=VALUE;
#   - the command's exit status returned (125: sid-run itself failed; 127: command not found).
#
# Usage: scripts/sid-run.sh [OPTIONS] [--] CMD [ARGS...]
#   --root DIR          the root filesystem (default: $HIPJIT_SID_ROOT, else
#                       ${HIPJIT_CI_CACHE:-/var/cache/hipjit-ci}/sid-root)
#   --bind DIR          also bind-mount DIR at the same path inside the root (repeatable)
#   --bind-to SRC DST   bind-mount SRC at DST inside the root (repeatable)
#   --no-repo           do not bind-mount the repository root
#   -e NAME=VALUE       set NAME in the command's environment (repeatable)
# Binds are mounted in the order given, after the repository. Needs root (unshare -m, chroot).
# Example: scripts/sid-run.sh -e HIPJIT_TEST_ENV=sid -- hipcc --version
set -euo pipefail

die() {
    printf 'sid-run: error: %s\n' "$*" >&2
    exit 125
}

# Second stage, inside the new mount namespace (see the end of this file):
#   __inside__ ROOT CWD NBINDS (SRC DST)... NENV (NAME=VALUE)... CMD ARGS...
inside() {
    local root="$1" cwd="$2" n i src dst
    shift 2
    # The root as a mount point of its own: then a sid-run.sh (or unshare) run inside it can make
    # its "/" private in turn.
    mount --bind "$root" "$root" || die "cannot bind-mount $root on itself"
    mount -t proc proc "$root/proc" || die "cannot mount /proc in $root"
    mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/tmp" || die "cannot mount a tmpfs on $root/tmp"
    if [[ -d "$root/dev/shm" ]]; then
        mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm" || die "cannot mount $root/dev/shm"
    fi
    n="$1"
    shift
    for ((i = 0; i < n; i++)); do
        src="$1" dst="$2"
        shift 2
        if [[ -d "$src" ]]; then
            mkdir -p -- "$root$dst" || die "cannot create the mount point $root$dst"
        elif [[ ! -e "$root$dst" ]]; then
            if ! { mkdir -p -- "$(dirname -- "$root$dst")" && : >"$root$dst"; }; then
                die "cannot create the mount point $root$dst"
            fi
        fi
        mount --bind -- "$src" "$root$dst" || die "cannot bind-mount $src at $root$dst"
    done
    local -a envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8)
    [[ -n "${TERM:-}" ]] && envs+=("TERM=$TERM")
    n="$1"
    shift
    for ((i = 0; i < n; i++)); do
        envs+=("$1")
        shift
    done
    # shellcheck disable=SC2016 # $1 and $@ belong to the inner shell.
    exec chroot "$root" /usr/bin/env -i "${envs[@]}" /bin/sh -c \
        'cd -- "$1" 2>/dev/null || { printf "sid-run: error: the working directory %s is not inside the root (bind-mount it with --bind)\n" "$1" >&2; exit 125; }; shift; exec "$@"' \
        sid-run "$cwd" "$@"
}

main() {
    local script_dir repo root="" bind_repo=1
    local -a binds=() envs=()
    script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
    while (($# > 0)); do
        case "$1" in
        --root)
            (($# >= 2)) || die "--root needs a directory"
            root="$2"
            shift 2
            ;;
        --bind)
            (($# >= 2)) || die "--bind needs a directory"
            [[ -e "$2" ]] || die "--bind $2: no such file or directory"
            binds+=("$(realpath -- "$2")" "$(realpath -- "$2")")
            shift 2
            ;;
        --bind-to)
            (($# >= 3)) || die "--bind-to needs SRC and DST"
            [[ -e "$2" ]] || die "--bind-to $2: no such file or directory"
            [[ "$3" == /* ]] || die "--bind-to $2 $3: DST must be an absolute path"
            binds+=("$(realpath -- "$2")" "$3")
            shift 3
            ;;
        --no-repo)
            bind_repo=0
            shift
            ;;
        -e)
            (($# >= 2)) || die "-e needs NAME=VALUE"
            [[ "$2" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "-e $2: expected NAME=VALUE"
            envs+=("$2")
            shift 2
            ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
            return 0
            ;;
        --)
            shift
            break
            ;;
        -*) die "unknown option: $1 (see --help)" ;;
        *) break ;;
        esac
    done
    (($# > 0)) || die "no command given (see --help)"
    [[ $(id -u) -eq 0 ]] || die "needs root (unshare -m, mount, chroot); run: sudo $0 ..."
    root="${root:-${HIPJIT_SID_ROOT:-${HIPJIT_CI_CACHE:-/var/cache/hipjit-ci}/sid-root}}"
    [[ -d "$root" ]] || die "no root filesystem at $root; scripts/setup.sh builds it"
    root="$(realpath -- "$root")"
    [[ -x "$root/bin/sh" && -x "$root/usr/bin/env" ]] || die "$root is not a root filesystem (no /bin/sh)"
    if ((bind_repo)); then
        repo="$(git -C "$script_dir" rev-parse --show-toplevel 2>/dev/null || dirname -- "$script_dir")"
        repo="$(realpath -- "$repo")"
        binds=("$repo" "$repo" "${binds[@]}")
    fi
    exec unshare --mount --propagation private -- \
        bash "${BASH_SOURCE[0]}" __inside__ "$root" "$(pwd -P)" \
        $((${#binds[@]} / 2)) "${binds[@]}" "${#envs[@]}" "${envs[@]}" "$@"
}

if [[ "${1:-}" == __inside__ ]]; then
    shift
    inside "$@"
else
    main "$@"
fi
