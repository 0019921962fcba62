#!/usr/bin/env bash
# make-disk.sh [--site DIR] [--cmdline ARGS] [--size-mb N] TREE DISK — turn an appliance tree
# (deploy/build-image.sh's directory output, with a kernel and initramfs installed) into a
# BIOS-bootable raw disk: MBR (syslinux's mbr.bin), partition 1 FAT32 "TALLYBOOT" with
# syslinux, the kernel and the initramfs (mounted at /boot/firmware on the node), partition
# 2 ext4 "tally-root" with the tree. No loop devices, no mounts, no bootloader run on the
# host: mkfs.ext4 -d, mkfs.vfat + mtools, syslinux --install on the partition file, sfdisk
# on the disk file. So it runs in containers and CI where mkosi's gpt_ext4 cannot.
#   --site DIR     copied over the tree first (node config, ssh keys, .network files)
#   --cmdline ARGS kernel command line (root= is added); setup-node --boot-config edits it
#   --size-mb N    root partition size (default: the tree plus 50%, at least 2048)
# Needs: mkfs.ext4 (e2fsprogs >= 1.43), mkfs.vfat (dosfstools), mcopy (mtools), syslinux,
# sfdisk (fdisk). As root (the tree's files keep their owners).
set -euo pipefail
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "make-disk.sh: $*" >&2; exit 1; }
site="" size_mb="" cmdline="console=ttyS0 intel_iommu=on iommu=pt"
while [ $# -gt 0 ]; do
	case "$1" in
	--site) site=${2:?--site needs a directory}; shift ;;
	--cmdline) cmdline=${2:?--cmdline needs kernel arguments}; shift ;;
	--size-mb) size_mb=${2:?--size-mb needs a number}; shift ;;
	-h|--help) usage; exit 0 ;;
	-*) echo "make-disk.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
	shift
done
[ $# -eq 2 ] || { usage >&2; exit 2; }
tree=$(realpath "$1") disk=$2
[ -x "$tree/usr/bin/dpkg" ] || die "$tree is not a Debian tree"
[ -z "$site" ] || [ -d "$site" ] || die "--site: $site is not a directory"
[ -z "$size_mb" ] || [[ $size_mb =~ ^[0-9]+$ ]] || die "--size-mb: '$size_mb' is not a number"
for t in mkfs.ext4 mkfs.vfat mcopy syslinux sfdisk; do
	command -v $t >/dev/null || die "$t not found (apt-get install e2fsprogs dosfstools mtools syslinux fdisk)"
done
mbr=/usr/lib/syslinux/mbr/mbr.bin
[ -f $mbr ] || die "$mbr not found (apt-get install syslinux-common)"
kver=$(ls "$tree"/boot/vmlinuz-* 2>/dev/null | sed 's|.*/vmlinuz-||' | sort -V | tail -1)
[ -n "$kver" ] || die "no kernel in $tree/boot (build the tree with linux-image-amd64)"
if [ ! -f "$tree/boot/initrd.img-$kver" ]; then
	# mkosi's directory builds skip the initramfs; make it in the tree (private mounts)
	unshare --mount --propagation private sh -c 'mount -t proc proc "$1/proc" && mount --bind /dev "$1/dev" &&
		chroot "$1" update-initramfs -c -k "$2"' sh "$tree" "$kver" >/dev/null ||
		die "update-initramfs failed in $tree"
fi

# The image's own units (deploy/image: first-boot setup, per-node ssh host keys), then the site.
cp -a "$(dirname "$0")/image/." "$tree"/
[ -z "$site" ] || cp -a "$site"/. "$tree"/
systemctl --root="$tree" enable tally-firstboot.service systemd-networkd.service >/dev/null 2>&1 ||
	die "systemctl --root enable tally-firstboot systemd-networkd failed in $tree"
rm -f "$tree"/etc/ssh/ssh_host_*_key "$tree"/etc/ssh/ssh_host_*_key.pub
mkdir -p "$tree/boot/firmware"
cat >"$tree/etc/fstab" <<'EOF'
# make-disk.sh: ext4 root and the FAT boot partition (syslinux, kernel, initramfs)
LABEL=tally-root   /               ext4  errors=remount-ro  0 1
LABEL=TALLYBOOT    /boot/firmware  vfat  umask=0077,nofail  0 2
EOF
# A later kernel package (or update-initramfs) copies itself to the boot partition.
install -D -m 0755 /dev/stdin "$tree/etc/kernel/postinst.d/zz-tally-bootfs" <<'EOF'
#!/bin/sh
# make-disk.sh: keep /boot/firmware (syslinux's FAT partition) on the newest kernel.
set -e
k=$(ls /boot/vmlinuz-* | sed 's|.*/vmlinuz-||' | sort -V | tail -1)
mountpoint -q /boot/firmware || exit 0
[ -f "/boot/initrd.img-$k" ] || update-initramfs -c -k "$k"
cp "/boot/vmlinuz-$k" /boot/firmware/vmlinuz.new && mv /boot/firmware/vmlinuz.new /boot/firmware/vmlinuz
cp "/boot/initrd.img-$k" /boot/firmware/initrd.new && mv /boot/firmware/initrd.new /boot/firmware/initrd.img
EOF
mkdir -p "$tree/etc/initramfs/post-update.d"
ln -sf /etc/kernel/postinst.d/zz-tally-bootfs "$tree/etc/initramfs/post-update.d/zz-tally-bootfs"

work=$(mktemp -d "${disk}.work.XXXXXX")
trap 'rm -rf "$work"' EXIT
boot_mb=256
if [ -z "$size_mb" ]; then
	used=$(du -sm --apparent-size "$tree" | cut -f1)
	size_mb=$((used * 3 / 2 + 512))
	[ "$size_mb" -ge 2048 ] || size_mb=2048
fi
cat >"$work/syslinux.cfg" <<EOF
# make-disk.sh: the node's kernel command line (tally-setup-node --boot-config edits APPEND)
DEFAULT tally
PROMPT 0
TIMEOUT 0
LABEL tally
  LINUX /vmlinuz
  INITRD /initrd.img
  APPEND root=LABEL=tally-root ro $cmdline
EOF
mkfs.vfat -C -F 32 -n TALLYBOOT "$work/boot.img" $((boot_mb * 1024)) >/dev/null
mcopy -i "$work/boot.img" "$tree/boot/vmlinuz-$kver" ::/vmlinuz
mcopy -i "$work/boot.img" "$tree/boot/initrd.img-$kver" ::/initrd.img
mcopy -i "$work/boot.img" "$work/syslinux.cfg" ::/syslinux.cfg
syslinux --install "$work/boot.img"
mkfs.ext4 -q -F -L tally-root -d "$tree" "$work/root.img" "${size_mb}M"

rm -f "$disk"
truncate -s $(((1 + boot_mb + size_mb + 1) * 1024 * 1024)) "$disk"
sfdisk -q "$disk" <<EOF
label: dos
start=2048, size=$((boot_mb * 2048)), type=c, bootable
start=$(((1 + boot_mb) * 2048)), size=$((size_mb * 2048)), type=83
EOF
dd if=$mbr of="$disk" bs=440 count=1 conv=notrunc status=none
dd if="$work/boot.img" of="$disk" bs=1M seek=1 conv=notrunc,sparse status=none
dd if="$work/root.img" of="$disk" bs=1M seek=$((1 + boot_mb)) conv=notrunc,sparse status=none
echo "make-disk.sh: $disk: kernel $kver, boot ${boot_mb} MiB + root ${size_mb} MiB; cmdline: $cmdline"
