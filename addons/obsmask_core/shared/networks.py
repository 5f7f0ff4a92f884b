"""Which clients may use a route the proxy serves itself (the MCP gateway,
the recall server): the loopback, and the networks a setting names."""

from __future__ import annotations

import ipaddress

from obsmask_core.shared.errors import SettingError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
LOOPBACK: tuple[Network, ...] = (ipaddress.ip_network("127.0.0.0/8"),
                                 ipaddress.ip_network("::1/128"))


def client_networks(key: str, value: object) -> tuple[Network, ...]:
    """The networks of ``allow_clients`` (``10.0.0.0/8``, ``192.0.2.7``,
    ``::/0``...); SettingError naming the entry that is not one."""
    networks = []
    for entry in value if isinstance(value, (list, tuple)) else ():
        try:
            networks.append(ipaddress.ip_network(str(entry).strip(), strict=False))
        except ValueError:
            raise SettingError(key, f"{entry!r} is not an IP address or network "
                                    "(e.g. 192.168.1.0/24)") from None
    return tuple(networks)


def client_allowed(address: str, allowed: tuple[Network, ...]) -> bool:
    """May a client at ``address`` use the route: is it on the loopback or
    in one of the ``allowed`` networks? (An IPv4 client of a dual-stack socket
    shows as ``::ffff:a.b.c.d``.)"""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in (*LOOPBACK, *allowed))



def check_networks(key: str, value: object) -> None:
    """The check of an ``allow_clients`` setting (raises SettingError)."""
    client_networks(key, value)
