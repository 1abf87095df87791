"""The runtime plugins' settings (``plugins.runtime_common.settings``), host port picking
and port bindings: defaults, bad values named, the factories refusing them."""
from __future__ import annotations

import pytest

from plugins.runtime_common.hostports import HostPorts, is_port_conflict
from plugins.runtime_common.parsing import listed_host_ports, network_isolation, port_bindings
from plugins.runtime_common.settings import RuntimeSettings
from ports.runtime import PortSpec


def test_defaults():
    settings = RuntimeSettings.read({})
    assert settings == RuntimeSettings("127.0.0.1", (20000, 29999), 1024, 512, 1.0, 600.0)


def test_values_are_read():
    settings = RuntimeSettings.read({
        "SLIPWAY_PUBLISH_ADDRESS": "10.0.0.5", "SLIPWAY_HOST_PORTS": "30000 - 30010",
        "SLIPWAY_PIDS_LIMIT": "64", "SLIPWAY_DEFAULT_MEMORY_MB": "256", "SLIPWAY_DEFAULT_CPUS": "0.5",
        "SLIPWAY_PULL_TIMEOUT": "90"})
    assert settings == RuntimeSettings("10.0.0.5", (30000, 30010), 64, 256, 0.5, 90.0)
    assert RuntimeSettings.read({"SLIPWAY_PUBLISH_ADDRESS": "::1"}).publish_address == "::1"


@pytest.mark.parametrize("name, value", [
    ("SLIPWAY_PUBLISH_ADDRESS", "0.0.0.0"),
    ("SLIPWAY_PUBLISH_ADDRESS", "::"),
    ("SLIPWAY_PUBLISH_ADDRESS", "localhost"),
    ("SLIPWAY_HOST_PORTS", "20000"),
    ("SLIPWAY_HOST_PORTS", "29999-20000"),
    ("SLIPWAY_HOST_PORTS", "0-100"),
    ("SLIPWAY_HOST_PORTS", "20000-70000"),
    ("SLIPWAY_PIDS_LIMIT", "0"),
    ("SLIPWAY_PIDS_LIMIT", "-1"),
    ("SLIPWAY_PIDS_LIMIT", "many"),
    ("SLIPWAY_DEFAULT_MEMORY_MB", "1"),
    ("SLIPWAY_DEFAULT_MEMORY_MB", "1.5"),
    ("SLIPWAY_DEFAULT_CPUS", "0"),
    ("SLIPWAY_DEFAULT_CPUS", "nan"),
    ("SLIPWAY_PULL_TIMEOUT", "0"),
    ("SLIPWAY_PULL_TIMEOUT", "soon"),
])
def test_bad_values_name_the_variable(name, value):
    with pytest.raises(ValueError, match=name):
        RuntimeSettings.read({name: value})


@pytest.mark.parametrize("factory", ["podman", "docker"])
def test_the_factories_refuse_bad_settings(factory, monkeypatch):
    from app.pluginmanager import make_plugin_manager, runtimes

    made = runtimes(make_plugin_manager())[factory]
    with pytest.raises(ValueError, match="SLIPWAY_HOST_PORTS"):
        made.create({"SLIPWAY_RUNTIME_ULIMITS": "", "SLIPWAY_HOST_PORTS": "nope"})
    with pytest.raises(ValueError, match="SLIPWAY_PIDS_LIMIT"):
        made.create({"SLIPWAY_PIDS_LIMIT": "zero"})
    assert made.create({"SLIPWAY_PIDS_LIMIT": "77"}).settings.pids_limit == 77


def test_the_host_port_range_is_read_as_core_reads_it():
    """One reading of SLIPWAY_HOST_PORTS: the runtimes pick from what deploys check against."""
    from core.panel.compose import host_port_range

    for raw in ("1-1", "", " 30000 - 30010 "):
        settings = {"SLIPWAY_HOST_PORTS": raw}
        assert RuntimeSettings.read(settings).host_ports == host_port_range(settings)
    assert RuntimeSettings.read({"SLIPWAY_HOST_PORTS": "1-1"}).host_ports == (1, 1)


def test_bindings_name_the_address_and_every_host_port():
    ports = (PortSpec(8080, 20001), PortSpec(53, 20002, "udp"))
    assert port_bindings(ports, "127.0.0.1") == {"8080/tcp": ("127.0.0.1", 20001), "53/udp": ("127.0.0.1", 20002)}
    with pytest.raises(ValueError):
        port_bindings((PortSpec(8080),), "127.0.0.1")


def test_listed_host_ports_of_both_apis():
    assert listed_host_ports({"Ports": [{"host_port": 20005, "range": 3}, {"host_port": 0}]}) == {20005, 20006, 20007}
    assert listed_host_ports({"Ports": [{"PublicPort": 25000}, {"PrivatePort": 80}]}) == {25000}
    assert listed_host_ports({"Ports": None}) == set()


def test_network_isolation():
    assert network_isolation({"options": {"isolate": "true"}}) is None
    assert network_isolation({"options": {"isolate": "strict"}}) is None
    assert network_isolation({"options": {"mtu": "1500"}}) == {"mtu": "1500"}
    assert network_isolation({"options": {}}) == {} and network_isolation({}) == {}


def test_host_ports_skip_used_taken_and_unbindable_ports():
    busy = {20000, 20002}
    picker = HostPorts("127.0.0.1", 20000, 20004, probe=lambda address, port, protocol: port not in busy)
    picked = picker.pick(["tcp", "udp"], used={20001})
    assert sorted(picked) == [20003, 20004]
    with pytest.raises(ValueError, match="no free host port left in 20000-20004"):
        picker.pick(["tcp"], used={20001})  # the rest were handed out moments ago
    picker.release([20003])
    assert picker.pick(["tcp"], used={20001}) == [20003]
    assert picker.pick(["tcp"], used=set()) == [20001]


def test_a_kept_port_is_taken_when_it_is_free_else_another_is_picked():
    busy = {20002}
    picker = HostPorts("127.0.0.1", 20000, 20009, probe=lambda address, port, protocol: port not in busy)
    assert picker.pick(["tcp"], used=set(), prefer=[20005]) == [20005]
    # handed out by this process moments ago (to the service that kept it): still its own
    assert picker.pick(["tcp"], used=set(), prefer=[20005]) == [20005]
    for taken in ({"used": {20005}}, {"used": set(), "avoid": {20005}}):  # a container publishes it; it lost a race
        assert picker.pick(["tcp"], prefer=[20005], **taken) != [20005]
    assert picker.pick(["tcp"], used=set(), prefer=[20002]) != [20002]  # something listens there
    assert picker.pick(["tcp"], used=set(), prefer=[30000]) != [30000]  # outside SLIPWAY_HOST_PORTS now
    first, second = picker.pick(["tcp", "udp"], used=set(), prefer=[20007, None])
    assert first == 20007 and second != 20007


def test_port_conflicts_are_recognised():
    assert is_port_conflict("starting container x: cannot listen on the TCP port: listen tcp4 127.0.0.1:20000: "
                            "bind: address already in use")
    assert is_port_conflict("driver failed programming external connectivity: Bind for 127.0.0.1:20000 failed: "
                            "port is already allocated")
    assert not is_port_conflict("no such image")
