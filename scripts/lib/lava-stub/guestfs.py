"""A stand-in for libguestfs's Python module, for Debian's lava-dispatcher unpacked by
scripts/install-deps where python3-guestfs cannot be installed (its qemu-system 7.2 conflicts
with a backported qemu-utils). lava_dispatcher.utils.filesystem imports guestfs when it loads;
only the actions that build disk images use it, and an SSH device runs none of them. Any use
fails loudly instead of pretending."""


class GuestFS:
    def __init__(self, *args, **kwargs):
        raise RuntimeError(
            "libguestfs is not installed (python3-guestfs): this LAVA action builds disk images, "
            "which scripts/lava-localhost's SSH device does not support"
        )
