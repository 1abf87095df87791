"""Compose text read as ``docker compose`` reads it, within limits: YAML 1.2, the size and
node limits checked before anything is built (alias bombs), interpolation of the parsed
values (no YAML injection through a variable), host ports in ``SLIPWAY_HOST_PORTS``, and
odd but valid YAML answered with a named refusal, never another exception."""
from __future__ import annotations

import random
import tracemalloc

import pytest
import yaml as pyyaml

from core.errors import Invalid
from core.panel.compose import dump_compose, host_port_range, interpolate, load_compose, parse_compose
from core.panel.compose.loader import MAX_BYTES, MAX_DEPTH, MAX_NODES
from plugins.deploy_compose import ComposeDeploy
from plugins.deploy_template import TemplateDeploy, load_catalog
from tests.support.compose import HEAD, laughs


def refusal(text, variables=None, **kwargs) -> dict:
    with pytest.raises(Invalid) as info:
        parse_compose(text, variables, **kwargs)
    return info.value.fields


# --- YAML 1.2 ---------------------------------------------------------------------------


def test_yaml_1_2_scalars_stay_what_compose_reads():
    document = load_compose("a: [22:22, 20022:22, 1:30, yes, no, on, off, y, 2001-01-01, 010, 0o10, 0x1f, 1_000,"
                            " 1.5, .inf, true, False, null, ~, '22:22', !!str 5]\n")
    assert document["a"] == ["22:22", "20022:22", "1:30", "yes", "no", "on", "off", "y", "2001-01-01", 10, 8, 31,
                             1000, 1.5, float("inf"), True, False, None, None, "22:22", "5"]
    # a %YAML 1.1 directive does not bring back the sexagesimal numbers or yes/no booleans
    assert load_compose("%YAML 1.1\n---\na: [22:22, yes, 0777]\n")["a"] == ["22:22", "yes", 777]


def test_ports_are_strings_not_sexagesimal_numbers():
    [web] = parse_compose(HEAD + "    ports:\n      - 20022:22\n      - 8080\n      - 20080:80/udp\n").components
    assert [(p.container_port, p.host_port, p.protocol) for p in web.ports] == [
        (22, 20022, "tcp"), (8080, None, "tcp"), (80, 20080, "udp")]
    # - 22:22 is host port 22 (refused: outside the range), never the number 1342
    message = refusal(HEAD + "    ports:\n      - 22:22\n")["compose"]
    assert "host port 22 " in message and "1342" not in message


def test_yes_no_on_off_environment_values_stay_strings():
    [web] = parse_compose(HEAD + "    environment:\n      A: yes\n      B: off\n      C: true\n      D: 5\n"
                                 "      E:\n").components
    assert web.environment == {"A": "yes", "B": "off", "C": "true", "D": "5", "E": ""}


def test_dumped_text_reads_back_the_same_under_yaml_1_2_and_1_1():
    document = {"services": {"web": {"image": "x", "ports": ["22:22", "20022:22", "8080"],
                                     "environment": {"A": "yes", "B": "on", "C": "010", "D": "2001-01-01",
                                                     "E": "null", "F": "1e3", "G": "plain", "H": "a\nb"}}}}
    text = dump_compose(document)
    assert load_compose(text, interpolating=False) == document
    assert pyyaml.safe_load(text) == document  # a YAML 1.1 reader gets the same strings
    assert "'22:22'" in text and "'yes'" in text


def test_a_map_used_twice_is_dumped_once_with_an_anchor():
    shared = {"A": "1"}
    text = dump_compose({"services": {"a": {"image": "x", "environment": shared},
                                      "b": {"image": "x", "environment": shared}}})
    assert text.count("A: '1'") == 1 and "&" in text and "*" in text
    assert load_compose(text)["services"]["b"]["environment"] == {"A": "1"}


# --- limits -----------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [9, 12, 30])
def test_alias_bombs_are_refused_before_anything_is_built(levels):
    text = laughs(levels)
    assert len(text.encode()) < 2500
    tracemalloc.start()
    try:
        fields = refusal(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert fields == {"compose": f"more than {MAX_NODES} YAML nodes once anchors and aliases are expanded"}
    assert peak < 5 * 1024 * 1024, peak  # 9 ** 30 strings were never made


@pytest.mark.slow  # thousands of generated inputs
def test_the_node_limit_counts_expanded_aliases_exactly():
    def text(items):  # root map + key + list + items, then the alias
        return "a: &a [" + ",".join(["1"] * items) + "]\n"

    assert len(load_compose(text(MAX_NODES - 3))["a"]) == MAX_NODES - 3
    with pytest.raises(Invalid, match="compose definition"):
        load_compose(text(MAX_NODES - 2))
    half = (MAX_NODES - 5) // 2  # root, a, list, b, alias-of-list: the list counted twice
    assert load_compose("a: &a [" + ",".join(["1"] * half) + "]\nb: *a\n")["b"]
    with pytest.raises(Invalid) as info:
        load_compose("a: &a [" + ",".join(["1"] * (half + 1)) + "]\nb: *a\n")
    assert "10000 YAML nodes" in info.value.fields["compose"]


def test_text_over_128_kib_is_refused_and_128_kib_is_read():
    filler = "    command: echo "
    exact = HEAD + filler + "a" * (MAX_BYTES - len(HEAD) - len(filler) - 1) + "\n"
    assert len(exact.encode()) == MAX_BYTES
    assert parse_compose(exact).components[0].command[1].startswith("aaa")
    assert refusal(exact + " ") == {"compose": "the compose definition is larger than 128 KiB (131072 bytes)"}
    wide = HEAD + filler + "é" * ((MAX_BYTES - len(HEAD)) // 2) + "\n"  # fewer characters than bytes
    assert len(wide) < MAX_BYTES < len(wide.encode())
    assert "larger than 128 KiB" in refusal(wide)["compose"]


def test_recursive_aliases_and_deep_nesting_are_refused():
    assert "recursive" in refusal("services: &s\n  web: *s\n")["compose"]
    assert f"{MAX_DEPTH} levels" in refusal("[" * 20000 + "]" * 20000)["compose"]
    chain = "".join(f"l{i}: &l{i} [*l{i - 1}]\n" for i in range(1, MAX_DEPTH + 5))
    assert f"{MAX_DEPTH} levels" in refusal("l0: &l0 [x]\n" + chain)["compose"]


def test_a_long_string_aliased_many_times_hits_the_expanded_text_limit():
    big = "x" * 100_000
    text = f"a: &a '{big}'\nb: [" + ",".join(["*a"] * 20) + "]\n"
    with pytest.raises(Invalid, match="compose definition") as info:
        load_compose(text)
    assert "1024 KiB" in info.value.fields["compose"]


def test_variables_cannot_blow_the_text_up():
    text = HEAD + "    command: echo " + "${X}" * 5000 + "\n"
    assert "1024 KiB" in refusal(text, {"X": "y" * 10_000})["compose"]


# --- interpolation ----------------------------------------------------------------------


@pytest.mark.parametrize("template, expected", [
    ("$A ${A} $$A $$ ${A}x $1 a$", "1 1 $A $ 1x $1 a$"),
    ("${U:-d} ${E:-d} ${A:-d}", "d d 1"),
    ("${U-d} ${E-d} ${A-d}", "d  1"),
    ("${U:+a} ${E:+a} ${A:+a}", "  a"),
    ("${U+a} ${E+a} ${A+a}", " a a"),
    ("${E?m}${A:?m}", "1"),
    ("${U:-${A}} ${U:-${U2:-deep}} ${A:+<${A}>}", "1 deep <1>"),
    ("${U:-{}} ${U:-a{b}c}", "{} a{b}c"),
    ("${A:-${U:?never evaluated}}", "1"),
    ("${lower_case} ${_X}", " "),
])
def test_interpolation_follows_the_compose_specification(template, expected):
    assert interpolate(template, {"A": "1", "E": ""}) == expected


@pytest.mark.parametrize("template, variables, field, message", [
    ("${DB:?set a database password}", {}, "variables.DB", "set a database password"),
    ("${DB:?set a database password}", {"DB": ""}, "variables.DB", "set a database password"),
    ("${DB?needed}", {}, "variables.DB", "needed"),
    ("${DB:?}", {}, "variables.DB", "required variable DB is missing a value"),
    ("${U:-${DB:?inner ${A}}}", {"A": "x"}, "variables.DB", "inner x"),
])
def test_question_forms_are_422_on_the_variable(template, variables, field, message):
    fields = refusal(HEAD + f"    environment:\n      P: \"{template}\"\n", variables)
    assert fields == {field: message}


def test_an_empty_value_satisfies_the_plain_question_form():
    [web] = parse_compose(HEAD + "    environment:\n      P: ${DB?needed}\n", {"DB": ""}).components
    assert web.environment == {"P": ""}


@pytest.mark.parametrize("template", ["${", "${A", "${A:-x", "${1A}", "${A B}", "${A:x}", "${}"])
def test_malformed_interpolation_is_a_named_refusal(template):
    assert "interpolation format" in refusal(HEAD + f"    command: echo '{template}'\n")["compose"]


def test_a_variable_cannot_inject_yaml_structure():
    """The old reader interpolated the raw text: a value with a newline added keys (an
    image, a port outside the range, a bind mount). Values are now substituted into the
    parsed strings, so the whole value is one string."""
    evil = "x\n    ports: ['22:22']\n    volumes: ['/:/host']\n  evil:\n    image: attacker/miner"
    text = HEAD + "    environment:\n      PASSWORD: ${PASSWORD}\n      QUOTED: \"${PASSWORD}\"\n"
    plan = parse_compose(text, {"PASSWORD": evil})
    assert [c.name for c in plan.components] == ["web"]
    [web] = plan.components
    assert web.environment == {"PASSWORD": evil, "QUOTED": evil}
    assert web.ports == () and web.volumes == ()
    flow = HEAD + "    command: [echo, '${X}']\n"  # a flow sequence: "a, b]" must not add items
    assert parse_compose(flow, {"X": "a, b], ports: ['22:22'"}).components[0].command == (
        "echo", "a, b], ports: ['22:22'")


def test_keys_are_not_interpolated():
    [web] = parse_compose(HEAD + "    environment:\n      ${KEY}: v\n", {"KEY": "PATH"}).components
    assert web.environment == {"${KEY}": "v"}
    assert "services.${S}" in refusal("services:\n  ${S}:\n    image: x\n", {"S": "web"})["compose"]


def test_a_template_variable_cannot_inject_yaml_either():
    catalog = {t["id"]: t for t in load_catalog()}
    evil = "s3cret\n        EVIL: 1\n      ports: ['22:22']"
    plan = TemplateDeploy().plan({"template_id": "postgres", "variables": {"POSTGRES_PASSWORD": evil}}, catalog)
    assert plan.components[0].environment == {"POSTGRES_PASSWORD": evil, "POSTGRES_DB": "app",
                                              "PGDATA": "/var/lib/postgresql/data/pgdata"}
    assert plan.components[0].ports[0].host_port is None


def test_interpolated_numbers_still_read_as_numbers():
    text = HEAD + ("    cpus: ${CPUS}\n    mem_limit: ${MEM}\n    ports: ['${PORT}:80']\n"
                   "    healthcheck: {test: [CMD, 'true'], retries: '${R}', disable: '${OFF}'}\n")
    [web] = parse_compose(text, {"CPUS": "0.5", "MEM": "256m", "PORT": "20080", "R": "4", "OFF": "false"}).components
    assert (web.cpus, web.memory_mb, web.ports[0].host_port, web.healthcheck.retries) == (0.5, 256, 20080, 4)


# --- host ports -------------------------------------------------------------------------


@pytest.mark.parametrize("port, host", [
    ("20000:80", 20000), ("29999:80", 29999), ("80", None), (8080, None), ({"target": 80, "published": 20001}, 20001),
    ({"target": "80", "published": "20002", "protocol": "udp"}, 20002), ({"target": 80}, None),
])
def test_host_ports_inside_the_range(port, host):
    text = dump_compose({"services": {"web": {"image": "x", "ports": [port]}}})
    assert parse_compose(text).components[0].ports[0].host_port == host


@pytest.mark.parametrize("port, words", [
    ("19999:80", "host port 19999 is outside the ports this panel allows (20000-29999)"),
    ("30000:80", "host port 30000 is outside"),
    ("80:80", "host port 80 is outside"),
    ({"target": 80, "published": 443}, "host port 443 is outside"),
    ("127.0.0.1:20080:80", "names a host address"),
    ("0.0.0.0:20080:80", "names a host address"),
    ("[::1]:20080:80", "names a host address"),
    ({"target": 80, "published": 20080, "host_ip": "0.0.0.0"}, "host_ip"),
    ({"target": 80, "mode": "host"}, "unsupported key services.web.ports.mode"),
    ({"published": 20080}, "needs target"),
    ("20000-20010:80-90", "port ranges are not supported"),
    ("20080:80/sctp", "unsupported protocol 'sctp'"),
    ("20080:0", "from 1 to 65535"),
    ("20080:99999", "from 1 to 65535"),
    (True, "unsupported port"),
    ([80], "unsupported port"),
])
def test_host_ports_outside_the_range_and_host_addresses_are_refused(port, words):
    text = dump_compose({"services": {"web": {"image": "x", "ports": [port]}}})
    message = refusal(text)["compose"]
    assert words in message and "services.web.ports" in message


def test_the_range_comes_from_slipway_host_ports():
    """The app reads the range once (``Config.host_ports``) and gives it to every method
    (``DeployMethod.host_ports``, through its factory); a method does not read the
    variable of the environment itself."""
    from app.composition import Composition
    from app.config import Config

    parts = Composition(Config(database_url="sqlite:///:memory:",
                               host_ports=host_port_range({"SLIPWAY_HOST_PORTS": " 30000 - 30010 "}),
                               settings={"SLIPWAY_HOST_PORTS": "1-2"}))
    method = parts.deploy_methods["compose"]
    assert all(m.host_ports == (30000, 30010) for m in parts.deploy_methods.values())
    text = HEAD + "    ports: ['30005:80']\n"
    assert method.plan({"compose": text}, {}).components[0].ports[0].host_port == 30005
    assert method.parse(text).components[0].ports[0].host_port == 30005
    with pytest.raises(Invalid, match="compose") as info:
        method.plan({"compose": HEAD + "    ports: ['20000:80']\n"}, {})
    assert "(30000-30010)" in info.value.fields["compose"]
    assert parse_compose(text, host_ports=(30000, 30010)).components[0].ports[0].host_port == 30005
    assert ComposeDeploy().host_ports == (20000, 29999) == host_port_range({"SLIPWAY_HOST_PORTS": ""})


@pytest.mark.parametrize("value", ["20000", "a-b", "30000-20000", "0-10", "1-65536", "1-2-3", "20000:29999"])
def test_a_bad_slipway_host_ports_names_the_variable(value):
    with pytest.raises(ValueError, match="SLIPWAY_HOST_PORTS"):
        host_port_range({"SLIPWAY_HOST_PORTS": value})


# --- odd shapes -------------------------------------------------------------------------


@pytest.mark.parametrize("text, words", [
    ("services:\n  web: !!python/object:os.system {image: x}\n", "unsupported YAML tag"),
    ("services:\n  web:\n    image: !!python/name:os.system x\n", "unsupported YAML tag"),
    ("services:\n  web:\n    image: !!binary aGVsbG8=\n", "unsupported YAML tag"),
    ("services:\n  web:\n    image: !custom x\n", "unsupported YAML tag"),
    ("services: !!set {web: null}\n", "unsupported YAML tag"),
    ("services: !!omap [web: {image: x}]\n", "unsupported YAML tag"),
    ("services:\n  web:\n    image: x\n    image: y\n", "services.web.image: the key appears twice"),
    ("services:\n  ? [a, b]\n  : {image: x}\n", "keys must be plain text"),
    ("services:\n  ? {a: b}\n  : {image: x}\n", "keys must be plain text"),
    ("services:\n  web:\n    <<: [x]\n    image: y\n", "merge key"),
    ("services:\n  web:\n    <<: 5\n    image: y\n", "merge key"),
    ("a: 1\n---\nb: 2\n", "not valid YAML"),
    ("services:\n  web: {image: x\n", "not valid YAML"),
    ("services:\n  web:\n    image: *nowhere\n", "not valid YAML"),
    ("\t- x", "not valid YAML"),
    ("services:\n  web:\n    image: \"\\x\"\n", "not valid YAML"),
])
def test_odd_yaml_is_a_named_refusal(text, words):
    assert words in refusal(text)["compose"]


def test_anchors_in_keys_and_merge_keys_work_as_compose_has_them():
    text = ("x-base: &base\n  image: localhost/busybox:latest\n  environment: &env {A: '1'}\n"
            "services:\n  &name web:\n    <<: *base\n    command: [sh]\n"
            "  db:\n    <<: [*base, {image: other, cpus: 0.5}]\n    environment:\n      <<: *env\n      B: '2'\n"
            "  *name-x:\n    image: y\n")
    with pytest.raises(Invalid):  # "*name-x" is an alias to an unknown anchor
        parse_compose(text)
    text = text.replace("  *name-x:\n    image: y\n", "")
    plan = parse_compose(text)
    db, web = plan.components
    assert (web.image, web.command, web.environment) == ("localhost/busybox:latest", ("sh",), {"A": "1"})
    assert (db.image, db.cpus, db.environment) == ("localhost/busybox:latest", 0.5, {"A": "1", "B": "2"})
    aliased_key = "services:\n  &k web:\n    image: x\n    environment: {*k : v}\n"
    assert parse_compose(aliased_key).components[0].environment == {"web": "v"}


@pytest.mark.slow  # thousands of generated inputs
def test_random_mutations_of_a_compose_text_give_a_plan_or_a_named_refusal():
    """Valid and invalid YAML of odd shapes (tags, anchors, aliases, merge keys, flow and
    block mixes, long strings, control characters): never an exception but ``Invalid``."""
    rng = random.Random(20261123)
    base = ("x-common: &common\n  image: localhost/busybox:latest\n  environment: &env {A: '1', B: yes}\n"
            "services:\n  web:\n    <<: *common\n    command: [httpd, -f, -p, '8080']\n"
            "    ports: ['20080:8080', 9000]\n    healthcheck: {test: [CMD, 'true'], retries: 3, interval: 5s}\n"
            "  db:\n    image: x\n    volumes: [data:/d]\n    depends_on: [web]\n    cpus: '0.5'\n"
            "volumes:\n  data: {}\n")
    pieces = ["&a ", "*a", "*common", "<<: *env", "!!python/object:os.system ", "!!str ", "!!int ", "!!binary ",
              "!x ", "? ", ": ", "- ", "[", "]", "{", "}", ",", "\n", "\n  ", "\n    ", "'", '"', "#", "|", ">",
              "%YAML 1.1\n---\n", "---\n", "...\n", "${X}", "${X:?no}", "$", "\t", "\x00", "\ufeff", "22:22",
              "yes", "~", "0x1f", ".inf", "x" * 5000, "&b [*b]", "<<: [*a, *common]"]
    outcomes = {"plan": 0, "refused": 0}
    for _ in range(1500):
        text = base
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(len(text) + 1)
            if rng.random() < 0.3:
                text = text[:at] + text[at + rng.randrange(1, 12):]
            else:
                text = text[:at] + rng.choice(pieces) + text[at:]
        try:
            parse_compose(text, {"X": rng.choice(["1", "a: b", "{", "\n- x"])})
            outcomes["plan"] += 1
        except Invalid as exc:
            assert exc.fields and all(isinstance(v, str) and v for v in exc.fields.values()), exc.fields
            outcomes["refused"] += 1
    assert outcomes["plan"] and outcomes["refused"]
