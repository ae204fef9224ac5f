"""Whether a URL or host names this machine's loopback interface (the one check every module uses).

Loopback is 127.0.0.0/8, ``::1`` (also as an IPv4-mapped ``::ffff:127.x.y.z``), and the name
``localhost`` or any name under ``.localhost`` (RFC 6761 reserves them for loopback). No DNS
lookup: a name's answer could change between the check and the request, and the check must not
touch the network.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (an IP literal, bracketed or not, or a host name) is this machine's loopback."""
    name = host.strip().strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])  # drop an IPv6 zone id (fe80::1%eth0)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine's loopback; False for a URL without a host."""
    return is_loopback_host(urlsplit(url).hostname or "")
