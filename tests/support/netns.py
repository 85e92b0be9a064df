"""Network partitions made of Linux network namespaces (issue 41, item 4).

A server (PostgreSQL, the Stripe emulator, a Redis primary) runs in a namespace of its own,
joined to the root namespace by veth pairs, one per :class:`Link`, each a private /30 of
``10.231.0.0/16``. A process in the root namespace reaches the server at the link's
:attr:`Link.namespace_address`; the server's clients in the root namespace reach it through
that link only, so a test can cut one set of clients (those given one link's address) and not
another.

:meth:`Link.cut` takes the namespace's end of the pair down. The root namespace keeps its
end up and its route to the /30 (the kernel keeps a route whose link lost its carrier), so
what the root side's clients see is a partition rather than an error: packets vanish, an open
connection stalls until a timeout of the client's own gives up, a new one gets no answer (the
kernel reports the host unreachable once its neighbour lookup has failed, a few seconds in).
:meth:`Link.heal` takes it up again. No ``tc netem``, ``iptables`` or ``nft`` is needed (this
machine has none); only ``ip`` as root (docs: /work/shared/PLATFORM-NOTES.md).

Names carry the creating process's id (``bwpart-<pid>-<n>``, devices ``bwp<pid>[rn]<n>``), so
:func:`remove_stale` removes what a dead session left without touching a live one's (two
sessions, or two xdist workers, share the machine).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

NAMESPACE_PREFIX = "bwpart"
"""Every namespace this module makes is named ``bwpart-<pid>-<n>``."""
DEVICE_PREFIX = "bwp"
"""Every veth end this module makes is named ``bwp<pid>r<n>`` (root) or ``bwp<pid>n<n>``."""
NETWORK = ipaddress.IPv4Network("10.231.0.0/16")
"""Where links take their /30s: a private range nothing on this machine uses."""

_NAMESPACE_NAME = re.compile(rf"^{NAMESPACE_PREFIX}-(\d+)-\d+")
_DEVICE_NAME = re.compile(rf"^{DEVICE_PREFIX}(\d+)[rn]\d+")
_ALLOCATION_LOCK = Path(tempfile.gettempdir()) / "billing-tests-netns.lock"
_made = 0
"""Namespaces and links this process made so far: the ``<n>`` of the next name."""

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable_reason() -> str | None:
    """Why this machine cannot make namespaces for the tests, or ``None`` when it can."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux's"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    return None


def require_namespaces() -> None:
    """Skip the calling test, saying why, where namespaces cannot be made; in CI the machine
    is known to make them, so there the test fails instead."""
    reason = unavailable_reason()
    if reason is None:
        return
    if IN_CI:
        raise AssertionError(f"CI is expected to make network namespaces: {reason}")
    pytest.skip(reason)


def _ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _next_number() -> int:
    global _made
    _made += 1
    return _made


@dataclass(frozen=True)
class Link:
    """One veth pair between the root namespace and a namespace: a /30 whose first address is
    the root's end and whose second is the namespace's."""

    namespace: str
    root_device: str
    namespace_device: str
    network: ipaddress.IPv4Network

    @property
    def root_address(self) -> str:
        """Where the namespace's processes see the root namespace (and a server there sees
        its clients from this link come from)."""
        return str(self.network.network_address + 1)

    @property
    def namespace_address(self) -> str:
        """Where the root namespace's processes reach the namespace through this link."""
        return str(self.network.network_address + 2)

    def cut(self) -> None:
        """Partition: the namespace's end goes down, packets on the link vanish."""
        _ip("-n", self.namespace, "link", "set", self.namespace_device, "down")

    def heal(self) -> None:
        """End the partition: the namespace's end comes up again (its address and route come
        back with it)."""
        _ip("-n", self.namespace, "link", "set", self.namespace_device, "up")


@dataclass
class Namespace:
    """A network namespace of this process, with its loopback up and its links."""

    name: str
    links: list[Link] = field(default_factory=list)

    @property
    def exec_prefix(self) -> list[str]:
        """Put before a command line to run it in the namespace (``ip netns exec`` execs the
        command itself: the process keeps its pid, so signals reach it as usual)."""
        return ["ip", "netns", "exec", self.name]

    def add_link(self) -> Link:
        """A new veth pair to the root namespace on a /30 no other link on the machine has."""
        number = _next_number()
        pid = os.getpid()
        link_root, link_inside = f"{DEVICE_PREFIX}{pid}r{number}", f"{DEVICE_PREFIX}{pid}n{number}"
        # Held while the /30 is chosen and taken: two sessions must not pick the same one.
        with _ALLOCATION_LOCK.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            network = _unused_network()
            _ip("link", "add", link_root, "type", "veth", "peer", "name", link_inside)
            link = Link(self.name, link_root, link_inside, network)
            try:
                _ip("link", "set", link_inside, "netns", self.name)
                _ip("addr", "add", f"{link.root_address}/30", "dev", link_root)
                _ip("link", "set", link_root, "up")
                address = f"{link.namespace_address}/30"
                _ip("-n", self.name, "addr", "add", address, "dev", link_inside)
                _ip("-n", self.name, "link", "set", link_inside, "up")
            except RuntimeError:
                with contextlib.suppress(RuntimeError):
                    _ip("link", "delete", link_root)  # its peer goes with it
                raise
        self.links.append(link)
        return link

    def delete(self) -> None:
        """Remove the namespace; its veth pairs go with it."""
        with contextlib.suppress(RuntimeError):
            _ip("netns", "delete", self.name)
        for link in self.links:  # a pair not yet moved in would stay behind
            with contextlib.suppress(RuntimeError):
                _ip("link", "delete", link.root_device)


def _unused_network() -> ipaddress.IPv4Network:
    """A /30 of :data:`NETWORK` no address of the root namespace is in."""
    taken = {
        ipaddress.IPv4Interface(word).network.supernet(new_prefix=30)
        for line in _ip("-4", "-o", "addr", "show").splitlines()
        for word in line.split()[3:4]
        if ipaddress.IPv4Interface(word).ip in NETWORK
    }
    candidates = list(NETWORK.subnets(new_prefix=30))
    random.shuffle(candidates)
    for network in candidates:
        if network not in taken:
            return network
    raise RuntimeError(f"every /30 of {NETWORK} is taken")


@contextlib.contextmanager
def namespace(tag: str) -> Iterator[Namespace]:
    """A namespace named for this process and ``tag`` (the test's), removed with its links
    however the block ends."""
    name = f"{NAMESPACE_PREFIX}-{os.getpid()}-{_next_number()}-{tag}"[:60]
    _ip("netns", "add", name)
    made = Namespace(name)
    try:
        _ip("-n", name, "link", "set", "lo", "up")
        yield made
    finally:
        made.delete()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Remove the namespaces and veth ends a process that is gone made (a session killed
    before its ``finally``): a leftover's /30 stays taken and its name is in the way. The
    names removed."""
    if unavailable_reason() is not None:
        return []
    removed: list[str] = []
    with contextlib.suppress(RuntimeError):
        for line in _ip("netns", "list").splitlines():
            name = line.split()[0] if line.split() else ""
            found = _NAMESPACE_NAME.match(name)
            if found and not _alive(int(found.group(1))):
                with contextlib.suppress(RuntimeError):
                    _ip("netns", "delete", name)
                    removed.append(name)
        for line in _ip("-o", "link", "show").splitlines():
            device = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
            found = _DEVICE_NAME.match(device)
            if found and not _alive(int(found.group(1))):
                with contextlib.suppress(RuntimeError):
                    _ip("link", "delete", device)
                    removed.append(device)
    return removed
