#!/usr/bin/env bash
# The real cgroup v2 lane: boot Debian's stock kernel (the one linux-image-amd64 depends on: 6.1 on
# Debian 12) in a throw-away qemu VM over this machine's own filesystem (virtme-ng), and run the
# wrapper's real-kernel v2 tests (tests/wrapper/test_cgroup_v2_real.py) inside it, as root, for real.
#
#   tests/vm/cgroup2-lane.sh [OUTDIR]
#
# RIGHTSIZER_VM_SELECT=EXPR runs only the inner tests matching pytest's -k EXPR (for debugging).
# OUTDIR (default: a new directory under /tmp) receives junit.xml, pytest.log, figures.jsonl,
# guest-kernel, guest-controllers, vm.log and lane-seconds.  Exit 0: the lane ran and every inner test
# passed (or xfailed/skipped); 1: an inner test failed or the VM did not finish; 77: the lane cannot
# run on this machine (the reason is in OUTDIR/skip-reason and on stderr).
#
# Needs: qemu-system-x86_64 (Debian: qemu-system-x86), busybox (virtme's initramfs; Debian:
# busybox-static), depmod (kmod), dpkg-deb and apt-get, and vng/virtme-run (PyPI: virtme-ng, in the
# project's test extra) next to the Python given by $RIGHTSIZER_VM_PYTHON (default: .venv/bin/python).
# The kernel package is downloaded once (apt-get download: needs `apt-get update` to have run) and
# cached, unpacked with its modules indexed, under $RIGHTSIZER_VM_CACHE (default tests/vm/.cache,
# ignored by git).  KVM is not used (--disable-kvm): nested KVM hangs on this project's machines, and
# TCG boots in about 20 s; the whole lane takes about 6 minutes on a 2-core machine.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RIGHTSIZER_VM_CACHE:-$repo/tests/vm/.cache}
python=${RIGHTSIZER_VM_PYTHON:-$repo/.venv/bin/python}
out=${1:-$(mktemp -d /tmp/rightsizer-v2-lane.XXXXXX)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/{junit.xml,pytest.log,pytest.rc,figures.jsonl,guest-kernel,guest-controllers,skip-reason,vm.log}
start=$(date +%s)

skip() { echo "$*" > "$out/skip-reason"; echo "cgroup2-lane: SKIP: $*" >&2; exit 77; }

[ -x "$python" ] || skip "no Python at $python (create the venv: python3 -m venv .venv && .venv/bin/pip install -e '.[test]')"
PATH="$(dirname "$python"):$PATH"
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (Debian: apt-get install qemu-system-x86)"
command -v vng >/dev/null || skip "vng not installed next to $python (pip install virtme-ng: the project's test extra)"
command -v busybox >/dev/null || skip "busybox not installed (virtme-ng builds its initramfs with it; Debian: apt-get install busybox-static)"
command -v depmod >/dev/null || skip "depmod not installed (Debian: apt-get install kmod)"
[ "$(uname -m)" = x86_64 ] || skip "the lane boots an amd64 kernel; this machine is $(uname -m)"

# --- the stock kernel, once ---------------------------------------------------------------------
kdir="$cache/kernel"
vmlinuz=$(ls "$kdir"/boot/vmlinuz-* 2>/dev/null | head -1 || true)
if [ -z "$vmlinuz" ]; then
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || skip "no apt-get/dpkg-deb to fetch Debian's kernel package"
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  [ -n "$pkg" ] || skip "apt knows no linux-image-amd64 dependency (run apt-get update first)"
  rm -rf "$cache/dl" "$kdir" && mkdir -p "$cache/dl"
  (cd "$cache/dl" && apt-get download -q "$pkg" >/dev/null 2>&1) || skip "apt-get download $pkg failed"
  dpkg-deb -x "$cache"/dl/"$pkg"_*.deb "$kdir.tmp"
  rm -rf "$cache/dl"
  version=${pkg#linux-image-}
  depmod -b "$kdir.tmp" "$version"
  mv "$kdir.tmp" "$kdir"
  vmlinuz=$(ls "$kdir"/boot/vmlinuz-* | head -1)
fi
echo "cgroup2-lane: kernel $vmlinuz" >&2

# --- what runs inside the guest (OUTDIR is the only writable host directory) -----------------------
select=""
[ -z "${RIGHTSIZER_VM_SELECT:-}" ] || select="-k '${RIGHTSIZER_VM_SELECT//\'/}'"
cat > "$out/inner.sh" <<EOF
#!/bin/sh
cat /proc/version > "$out/guest-kernel"
cat /sys/fs/cgroup/cgroup.controllers > "$out/guest-controllers" 2>&1
# The delegated-parent test runs the wrapper as an unprivileged user (uid 65534).  An interpreter under a
# 0700 directory (pyenv in /root) is unreachable for it: in this throw-away guest only, lay a tmpfs
# overlay over each such directory and open it (o+x).  The host's files are not touched.
n=0
for d in \$(p="\$(readlink -f "$python")"; while [ "\$p" != / ]; do p=\$(dirname "\$p"); echo "\$p"; done | sort); do
  case "\$(stat -c %A "\$d")" in
    *[xt]) ;;
    *) n=\$((n + 1)); mkdir -p /run/lane-ovl\$n && mount -t tmpfs tmpfs /run/lane-ovl\$n &&
       mkdir /run/lane-ovl\$n/u /run/lane-ovl\$n/w &&
       mount -t overlay overlay -o lowerdir="\$d",upperdir=/run/lane-ovl\$n/u,workdir=/run/lane-ovl\$n/w "\$d" &&
       chmod o+x "\$d" ;;
  esac
done
cd "$repo"
PYTHONDONTWRITEBYTECODE=1 RIGHTSIZER_V2_FIGURES="$out/figures.jsonl" \\
  "$python" -m pytest -p no:cacheprovider -q -rA -o console_output_style=classic \\
  --junitxml="$out/junit.xml" $select tests/wrapper/test_cgroup_v2_real.py > "$out/pytest.log" 2>&1
echo \$? > "$out/pytest.rc"
EOF
chmod +x "$out/inner.sh"

# The guest sees the host's filesystem read-only (/tmp and a few others as throw-away overlays),
# OUTDIR read-write.  vng's own exit status is not the script's (it falls back to the serial console
# here), so the result is read from OUTDIR.
set +e
timeout "${RIGHTSIZER_VM_TIMEOUT:-900}" vng --run "$vmlinuz" --disable-kvm --user root --memory 2G --cpus 2 \
  --rwdir "$out" --verbose --exec "sh $out/inner.sh" > "$out/vm.log" 2>&1 < /dev/null
vmrc=$?
set -e
echo $(( $(date +%s) - start )) > "$out/lane-seconds"
if [ ! -f "$out/pytest.rc" ]; then
  if grep -q "Could not access KVM\|failed to initialize\|qemu-system-x86_64: " "$out/vm.log"; then
    skip "qemu cannot run here: $(grep -m1 'qemu-system-x86_64: ' "$out/vm.log")"
  fi
  echo "cgroup2-lane: the VM did not finish the tests (vng exit $vmrc); last lines of $out/vm.log:" >&2
  tail -20 "$out/vm.log" >&2
  exit 1
fi
echo "cgroup2-lane: guest $(cut -d' ' -f1-3 "$out/guest-kernel"); controllers: $(cat "$out/guest-controllers")" >&2
tail -n 30 "$out/pytest.log" >&2
echo "cgroup2-lane: finished in $(cat "$out/lane-seconds") s (pytest exit $(cat "$out/pytest.rc"))" >&2
[ "$(cat "$out/pytest.rc")" = 0 ]
