"""Test hosts on one machine: network namespaces joined to the host by veth pairs.

Each namespace gets its own network stack and address (10.213.N.2); the host
end of its link is 10.213.N.1. Processes started with ``ip netns exec`` inside
it reach PostgreSQL only over that link, through a small TCP relay the test
runs on the host end (PostgreSQL itself listens on loopback only). Needs root
and iproute2; ``available()`` says whether this machine can.
"""

from __future__ import annotations

import os
import shutil
import socket
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass


def available() -> str | None:
    """None when namespaces can be made here, else why not."""
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"sgprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class _Relay(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self.target = target
        super().__init__(listen, _Pipe)


class _Pipe(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: _Relay = self.server  # type: ignore[assignment]
        upstream = socket.create_connection(server.target)

        def pump(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for sock in (src, dst):
                    with suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

        other = threading.Thread(target=pump, args=(upstream, self.request), daemon=True)
        other.start()
        pump(self.request, upstream)
        other.join()
        upstream.close()


@dataclass
class Host:
    """One test host: its namespace and the address it reaches the database at."""

    name: str
    address: str
    """This host's own address."""
    gateway: str
    """The host end of the link, where the relay listens."""

    def command(self, *argv: str) -> list[str]:
        """``argv`` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.name, *argv]


@contextmanager
def hosts(count: int, *, relay_port: int, target: tuple[str, int]) -> Iterator[list[Host]]:
    """Make ``count`` namespaces with a relay on each link to ``target``; remove them afterwards."""
    made: list[Host] = []
    relays: list[_Relay] = []
    tag = os.getpid() % 10000
    try:
        for index in range(1, count + 1):
            name = f"sg{tag}h{index}"
            host_if, ns_if = f"sg{tag}a{index}", f"sg{tag}b{index}"
            gateway, address = f"10.213.{index}.1", f"10.213.{index}.2"
            _ip("netns", "add", name)
            made.append(Host(name, address, gateway))
            _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
            _ip("link", "set", ns_if, "netns", name)
            _ip("addr", "add", f"{gateway}/30", "dev", host_if)
            _ip("link", "set", host_if, "up")
            _ip("-n", name, "addr", "add", f"{address}/30", "dev", ns_if)
            _ip("-n", name, "link", "set", ns_if, "up")
            _ip("-n", name, "link", "set", "lo", "up")
            relay = _Relay((gateway, relay_port), target)
            threading.Thread(target=relay.serve_forever, daemon=True).start()
            relays.append(relay)
        yield made
    finally:
        for relay in relays:
            relay.shutdown()
            relay.server_close()
        for host in made:
            # Deleting the namespace deletes its veth end, and with it the pair.
            subprocess.run(["ip", "netns", "del", host.name], capture_output=True)
