"""The VM lab: small libvirt VMs (TCG) behind stock sushy-tools and virtualbmc.

::

    image.py   a bootable ISO (and kernel + initramfs) from Debian packages,
               cached; its init prints BMAAS-BOOTED via=<medium> on ttyS0
    domain.py  libvirt domains: 256 MiB, 1 vCPU, TCG, serial to a file, no NIC
    lab.py     hwlab vm up/down: the domains, sushy-emulator (libvirt driver),
               vbmcd, optional hwlab proxies in front, and the inventory
    state.py   vm.json, what up started: its shape (read as an input) and the
               ProcessMark of each emulator, which down signals only while it holds

Set-up of the host (packages, daemons, pool): ``scripts/vm-setup.sh``.
"""
