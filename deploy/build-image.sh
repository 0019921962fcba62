#!/usr/bin/env bash
# build-image.sh — build the Tally appliance image with mkosi (deploy/mkosi/mkosi.default):
# Debian 12 + tally-appliance + tally-tools, tallyd.service enabled. As root.
#   deploy/build-image.sh [--format gpt_ext4|disk|directory|tar] [--output DIR] [--debs DIR]
#                         [--site DIR] [--cmdline ARGS] [-- MKOSI_OPTIONS...]
#   --format   gpt_ext4 (default): mkosi's bootable GPT image (UEFI; not booted in tests), kernel
#              command line from mkosi.default (hugepages, IOMMU, isolated cores);
#              disk: a BIOS-bootable raw disk (MBR, syslinux on a FAT /boot/firmware,
#              ext4 root) assembled by deploy/make-disk.sh without loop devices or mounts:
#              the format booted and tested in QEMU (tests/vm_deploy); OUTPUT/tally-appliance.raw
#              directory / tar: the tree only (CI, chroot checks), not bootable
#   --site     disk only: a directory copied over the image's root (the node's
#              /etc/tally/tallyd.conf and node.conf, ssh keys, network files)
#   --cmdline  disk only: the kernel command line (default in deploy/make-disk.sh)
#   --output   where the image goes (default: build-image/ in the tree)
#   --debs     use .debs already built there instead of running deploy/build-debs.sh
#   after --    passed to mkosi, e.g. --kernel-command-line=... to match a node's cores
# Packages are cached in /var/cache/tally-deploy/mkosi (TALLY_DEPLOY_CACHE to change).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
format=gpt_ext4 output=$top/build-image debs="" site="" cmdline=""
mkosi_args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--format) format=${2:?--format needs a value}; shift ;;
	--output) output=${2:?--output needs a directory}; shift ;;
	--debs) debs=${2:?--debs needs a directory}; shift ;;
	--site) site=${2:?--site needs a directory}; shift ;;
	--cmdline) cmdline=${2:?--cmdline needs kernel arguments}; shift ;;
	--) shift; mkosi_args=("$@"); break ;;
	-h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "build-image.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$format" in gpt_ext4) bootable=yes ;; directory|tar) bootable=no ;;
disk) bootable=no ;; # mkosi builds the tree (with a kernel), make-disk.sh the disk
*) echo "build-image.sh: --format must be gpt_ext4, disk, directory or tar" >&2; exit 2 ;; esac
if [ "$format" != disk ] && [ -n "$site$cmdline" ]; then
	echo "build-image.sh: --site and --cmdline apply to --format disk only" >&2; exit 2
fi
[ "$(id -u)" -eq 0 ] || { echo "build-image.sh: run as root (mkosi and debootstrap need it)" >&2; exit 1; }
command -v mkosi >/dev/null || { echo "build-image.sh: mkosi not installed (apt-get install mkosi)" >&2; exit 1; }
cache=${TALLY_DEPLOY_CACHE:-/var/cache/tally-deploy}/mkosi
mkdir -p "$output" "$cache"
output=$(cd "$output" && pwd)

if [ -z "$debs" ]; then
	debs=$output/debs
	"$top/deploy/build-debs.sh" "$debs"
fi
debs=$(cd "$debs" && pwd)
# The packages' runtime dependencies go into the image's package list, so mkosi.finalize
# can install the .debs offline with dpkg.
deps=$("$top/deploy/deb-deps.sh" "$debs"/tally-appliance_*.deb "$debs"/tally-tools_*.deb)

# mkosi runs parts of the build in systemd-nspawn; without systemd as PID 1 (containers, CI
# runners) nspawn cannot register a scope unit, so it reuses the caller's.
[ -d /run/systemd/system ] || mkosi_args=(--nspawn-keep-unit "${mkosi_args[@]}")
mkosi_format=$format
if [ "$format" = disk ]; then
	mkosi_format=directory
	# The disk boots Debian's kernel with an initramfs (initramfs-tools) from the tree.
	deps="$deps,linux-image-amd64,initramfs-tools,systemd-sysv,udev,openssh-server"
fi
# --incremental: mkosi 14 reuses its cached tree only when a "cache-pre-dev" exists too, which
# it writes only for recipes with a build script (this one has none): an empty stand-in. It
# does not notice a changed package list (new .debs with new dependencies), so the cached
# tree is dropped when the list differs from the one it was built with.
for a in "${mkosi_args[@]}"; do
	[ "$a" = --incremental ] || continue
	pre="$output/debian~bookworm/tally-appliance"
	if [ "$(cat "$pre.packages" 2>/dev/null)" != "$deps" ]; then
		rm -rf "$pre".cache-pre-*
	fi
	mkdir -p "$pre.cache-pre-dev"
	printf '%s' "$deps" >"$pre.packages"
done
cd "$top/deploy/mkosi"
mkosi --force --format "$mkosi_format" --bootable "$bootable" --output-dir "$output" \
	--cache "$cache" --finalize-script "$top/deploy/mkosi/mkosi.finalize" \
	--environment "TALLY_DEBS=$debs" --package "$deps" "${mkosi_args[@]}" build
if [ "$format" = disk ]; then
	"$top/deploy/make-disk.sh" ${site:+--site "$site"} ${cmdline:+--cmdline "$cmdline"} \
		"$output/debian~bookworm/tally-appliance" "$output/tally-appliance.raw"
	echo "build-image.sh: bootable disk $output/tally-appliance.raw"
	exit 0
fi
echo "build-image.sh: image in $output/debian~bookworm:"
ls -1 "$output/debian~bookworm"
