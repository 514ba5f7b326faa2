"""Several hosts on one machine, for the tests and benchmarks of what crosses a network.

Each host is a Linux network namespace with its own address on a private bridge
(:mod:`tidal.rig.hosts`); a host's link can carry a delay and a loss rate in userspace
(:mod:`tidal.rig.wire`), because this kernel has no ``netem``. Nothing leaves the bridge: the
hosts reach each other and nothing else. Root only; :func:`unavailable` says why not."""

from tidal.rig.hosts import Host, Impairment, Rig, unavailable

__all__ = ["Host", "Impairment", "Rig", "unavailable"]
