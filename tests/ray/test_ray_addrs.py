"""`ray up` without --ip: each box's agent offers its addresses (`ray-node addrs`, bare stdlib),
and an address counts only when another box's dial reads THAT box's nonce back: a listener of
the dialler itself (a bridge address every box has, loopback on another machine) answers with
its own nonce and is refused, naming the box. Real agents, real listeners, real sockets."""
from __future__ import annotations

import ipaddress
import json

import pytest

from rgt_client.errors import ClientError
from rgt_client.ray import addrs as rayaddrs
from tests.ray.cluster import free_base
from tests.realbox import Box

pytestmark = pytest.mark.xdist_group("ray")


def _agent_json(box: Box, *args: str) -> dict:
    out = box.agent("ray-node", *args, bare=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_agent_offers_this_boxs_ipv4_addresses_with_the_route_toward_the_other_box_first(tmp_path):
    box = Box(tmp_path)
    box.home.mkdir(parents=True)
    said = _agent_json(box, "addrs", "--toward", "127.0.0.1")
    assert said["addrs"], said
    assert all(ipaddress.IPv4Address(a) for a in said["addrs"])
    assert "127.0.0.1" in said["addrs"] and said["how"]["127.0.0.1"] == "route to 127.0.0.1"
    # loopback reaches another "box" only on this same machine: it is tried last
    non_loop = [a for a in said["addrs"] if not a.startswith("127.")]
    assert said["addrs"][:len(non_loop)] == non_loop


def _listen(box: Box, ports: list[int], nonce: str) -> None:
    said = _agent_json(box, "listen", "--ports", ",".join(map(str, ports)), "--for", "30", "--token", nonce)
    assert said["listening"] == ports, said


def _reached(box: Box, nonce: str, cands: list[str], ports: list[int]) -> dict[str, list[str]]:
    said = _agent_json(box, "reach", "--expect", nonce, "--to", *["%s:%d" % (c, p) for c in cands for p in ports])
    return {c: ["%d (%s)" % (p, said["%s:%d" % (c, p)]) for p in ports if said["%s:%d" % (c, p)] != "ok"]
            for c in cands}


def test_an_address_is_kept_only_where_the_other_boxs_own_nonce_answers(tmp_path):
    a, b = Box(tmp_path / "a"), Box(tmp_path / "b")
    for box in (a, b):
        box.home.mkdir(parents=True)
    base = free_base(40)
    a_ports, b_ports = [base, base + 1], [base + 20, base + 21]
    _listen(a, a_ports, "nonce-a")
    _listen(b, b_ports, "nonce-b")
    try:
        cands = {"a": ["198.51.100.7", "127.0.0.1"], "b": ["198.51.100.8", "127.0.0.1"]}
        reached = {("a", "b"): _reached(a, "nonce-b", cands["b"], b_ports),
                   ("b", "a"): _reached(b, "nonce-a", cands["a"], a_ports)}
        addr, problems = rayaddrs.pick(["a", "b"], cands, reached, {})
        assert problems == [] and addr == {"a": "127.0.0.1", "b": "127.0.0.1"}, (problems, reached)

        # b "offers" ports where a's own listener answers (a bridge address every box has):
        # connected, yet not b's nonce -> refused, naming b and what each address said.
        reached[("a", "b")] = _reached(a, "nonce-b", cands["b"], a_ports)
        addr, problems = rayaddrs.pick(["a", "b"], cands, reached, {})
        assert "b" not in addr
        assert len(problems) == 1 and problems[0].startswith("no address of b is reached by every other box"), problems
        assert "127.0.0.1 (a: port %d (connected, but not to that box's listener" % base in problems[0], problems
        assert "198.51.100.8 (a: port" in problems[0]
    finally:
        for box in (a, b):
            box.agent("ray-node", "listen", "--stop", bare=True)


def test_a_named_address_that_fails_names_each_pair_as_before():
    reached = {("a", "b"): {"10.0.0.6": ["26389 (Connection refused)"]}, ("b", "a"): {"10.0.0.5": []}}
    addr, problems = rayaddrs.pick(["a", "b"], {"a": ["10.0.0.5"], "b": ["10.0.0.6"]}, reached, {"b": "10.0.0.6"})
    assert addr == {"a": "10.0.0.5"}
    assert problems == ["a cannot reach b (10.0.0.6) on port 26389 (Connection refused)"]


def test_a_boxs_candidates_are_kept_only_as_ipv4_literals_and_bounded():
    said = {"addrs": ["10.0.0.5", "10.0.0.5", "-oProxyCommand=x", "::1", 7, "10.0.0.6\n", "10.0.0.7"]
            + ["10.1.0.%d" % i for i in range(40)]}
    got = rayaddrs.from_box(said)
    assert got[:2] == ["10.0.0.5", "10.0.0.7"] and len(got) <= rayaddrs.MAX_CANDIDATES
    assert rayaddrs.from_box({"addrs": "10.0.0.5"}) == []


@pytest.mark.parametrize("ip, why", [("nohost", "expected HOST=ADDR"), ("c=10.0.0.9", "not one of the boxes"),
                                     ("a=", "expected HOST=ADDR")])
def test_a_bad_ip_override_is_a_usage_error(ip, why):
    with pytest.raises(ClientError) as err:
        rayaddrs.given((ip,), ["a", "b"])
    assert why in err.value.message and err.value.code == 2
