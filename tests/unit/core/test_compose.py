"""Compose parsing and template filling: plans, interpolation, and every refusal."""
import pytest

from core.errors import Invalid
from core.panel.compose import SERVICE_KEYS, interpolate, parse_compose
from plugins.deploy_template import TemplateDeploy, load_catalog

TWO = """
services:
  web:
    image: ${IMAGE:-localhost/busybox:latest}
    command: httpd -f -p 8080
    environment: {GREETING: "$GREETING", COST: "$$5"}
    ports: ["8080", "29000:81/udp"]
    volumes: ["site:/www"]
    depends_on: [db]
    healthcheck: {test: "wget -q -O - http://127.0.0.1:8080/", interval: 1m30s, retries: 2}
  db:
    image: localhost/busybox:latest
    environment: ["A=1", "B"]
volumes:
  site: {}
"""


def test_plan_order_ports_volumes_environment_healthcheck():
    plan = parse_compose(TWO, {"GREETING": "hi"})
    assert [c.name for c in plan.components] == ["db", "web"]
    db, web = plan.components
    assert web.image == "localhost/busybox:latest" and web.command == ("httpd", "-f", "-p", "8080")
    assert web.environment == {"GREETING": "hi", "COST": "$5"} and db.environment == {"A": "1", "B": ""}
    assert [(p.container_port, p.host_port, p.protocol) for p in web.ports] == [(8080, None, "tcp"), (81, 29000, "udp")]
    assert web.volumes == (("site", "/www"),) and plan.volumes == ("site",)
    assert web.healthcheck.test == ("CMD-SHELL", "wget -q -O - http://127.0.0.1:8080/")
    assert web.healthcheck.interval_s == 90 and web.healthcheck.retries == 2


def test_interpolation_rules():
    assert interpolate("$A ${A} ${B:-x} ${C-y} ${D:-z} $$A", {"A": "1", "C": "", "D": ""}) == "1 1 x  z $A"


@pytest.mark.parametrize("text, needle", [
    ("services:\n  web:\n    image: x\n    restart: always\n", "services.web.restart"),
    ("services:\n  web:\n    image: x\nnetworks: {}\n", "networks"),
    ("services:\n  web:\n    image: x\n    volumes: ['/etc:/etc']\n", "named volumes"),
    ("services:\n  web:\n    image: x\n    volumes: ['data:/d']\n", "not declared"),
    ("services:\n  web:\n    image: x\n    depends_on: [db]\n", "no service 'db'"),
    ("services:\n  a:\n    image: x\n    depends_on: [b]\n  b:\n    image: x\n    depends_on: [a]\n", "cycle"),
    ("services:\n  web:\n    command: x\n", "image is required"),
    ("services:\n  web:\n    image: x\n    ports: ['1.2.3.4:20080:80']\n", "host address"),
    ("services:\n  web:\n    image: x\n    healthcheck: {test: [CMD, x], interval: soon}\n", "duration"),
    ("services: {}\n", "non-empty services"),
    ("services: [\n", "YAML"),
    ("just text", "non-empty services"),
    ("services:\n  web:\n    image: x\n    cpus: lots\n", "services.web.cpus"),
    ("services:\n  web:\n    image: x\nvolumes: [d]\n", "volumes: a map"),
    ("services:\n  web:\n    image: x\n    command: 5\n", "services.web.command"),
    ("services:\n  web:\n    image: x\n    command: \"echo 'x\"\n", "services.web.command"),
    ("services:\n  web:\n    image: x\n    command: [{a: 1}]\n", "services.web.command"),
    ("services:\n  web:\n    image: x\n    ports: 8080\n", "services.web.ports"),
    ("services:\n  web:\n    image: x\n    volumes: 5\n", "services.web.volumes"),
    ("services:\n  web:\n    image: [x]\n", "services.web.image"),
    ("services:\n  web:\n    image: x\n    healthcheck: {test: [CMD, x], retries: abc}\n", "retries"),
    ("services:\n  web:\n    image: x\n    environment: {A: 1}\n    depends_on: {a: 1}\n", "no service"),
    ("services:\n  web:\n    image: x\n    environment: {A: {b: 1}}\n", "services.web.environment.A"),
    ("services:\n  web:\n    image: x\n    cpus: 0\n", "services.web.cpus"),
    ("services:\n  web:\n    image: x\n    mem_limit: 1k\n", "services.web.mem_limit"),
    ("services:\n  web:\n    image: x\n    mem_limit: huge\n", "services.web.mem_limit"),
])
def test_refusals_name_the_problem(text, needle):
    with pytest.raises(Invalid) as info:
        parse_compose(text)
    assert needle in info.value.fields["compose"]


def test_template_fills_defaults_and_requires_variables():
    catalog = {t["id"]: t for t in load_catalog()}
    method = TemplateDeploy()
    mail = {"id": "mail", "compose": "services:\n  m: {image: x, environment: {K: '${KEY}'}}\n",
            "variables": [{"name": "KEY", "required": True}]}
    with pytest.raises(Invalid) as info:
        method.plan({"template_id": "mail"}, {"mail": mail})
    assert info.value.fields == {"variables.KEY": "is required by the template"}
    plan = method.plan({"template_id": "postgres", "variables": {"POSTGRES_PASSWORD": "s3cret"}}, catalog)
    assert plan.components[0].environment == {"POSTGRES_PASSWORD": "s3cret", "POSTGRES_DB": "app",
                                              "PGDATA": "/var/lib/postgresql/data/pgdata"}
    assert plan.template_id == "postgres" and plan.variables["POSTGRES_DB"] == "app"
    assert plan.secrets == ("POSTGRES_PASSWORD",)
    with pytest.raises(Invalid) as info:
        method.plan({"template_id": "nope"}, catalog)
    assert "template_id" in info.value.fields
    for template in catalog.values():  # every shipped template parses with its defaults
        needed = {v["name"]: "x" for v in template["variables"] if v.get("required")}
        assert method.plan({"template_id": template["id"], "variables": needed}, catalog).components


@pytest.mark.parametrize("cpus, mem_limit, expected", [
    ("0.5", "256m", (0.5, 256)), (2, "1g", (2.0, 1024)), ("1.5", 134217728, (1.5, 128)), ("0.25", "64mb", (0.25, 64)),
])
def test_cpu_and_memory_limits(cpus, mem_limit, expected):
    text = f"services:\n  web:\n    image: x\n    cpus: {cpus!r}\n    mem_limit: {mem_limit!r}\n"
    [web] = parse_compose(text).components
    assert (web.cpus, web.memory_mb) == expected
    [bare] = parse_compose("services:\n  web:\n    image: x\n").components
    assert (bare.cpus, bare.memory_mb) == (None, None)


@pytest.mark.slow  # thousands of generated inputs
def test_any_shape_of_input_is_a_plan_or_a_named_refusal():
    """Whatever a client sends as compose (or a template's variables inject), the parser
    answers with a plan or ``Invalid``, never another exception (which would be a 500)."""
    import random

    import yaml

    rng = random.Random(20261122)
    leaves = [None, True, 0, 7, -1, 2.5, "", "x", "echo 'x", "8080", "a:b:c", "data:/d", "1g", "5s", "${X}"]

    def value(depth=0):
        kind = rng.randrange(4 if depth < 2 else 1)
        if kind == 0:
            return rng.choice(leaves)
        if kind == 1:
            return [value(depth + 1) for _ in range(rng.randrange(3))]
        return {rng.choice(["test", "retries", "interval", "a", "data"]): value(depth + 1)
                for _ in range(rng.randrange(3))}

    keys = sorted(SERVICE_KEYS)
    for _ in range(3000):
        service = {"image": rng.choice(["x", value()])}
        for key in rng.sample(keys, rng.randrange(len(keys))):
            service[key] = value()
        document = {"services": {"web": service}}
        if rng.random() < 0.5:
            document["volumes"] = rng.choice([{"data": {}}, value()])
        text = yaml.safe_dump(document)
        try:
            parse_compose(text, {"X": rng.choice(["1", "[", "{a: 1}"])})
        except Invalid as exc:
            assert exc.fields["compose"]
