"""Which images a build reads (core.panel.containerfiles): every FROM and --from of every
stage, ARG defaults applied, stages of the same file left out; the image rule a compose
``image:`` follows; the registry rule (a name lookup handed in, no network)."""
from __future__ import annotations

import pytest

from core.panel.containerfiles import (ContainerfileError, allow_private, engine_local, image_refusal, references,
                                       refusal, registry_host, registry_refusal)
from tests.support.fakes import FakeResolver

OWN = "svc_own"


def refs(text):
    return [(r.line, r.kind, r.image) for r in references(text)]


def why(text, **kwargs):
    """The refusal at create (a name that does not resolve is accepted)."""
    return refusal(text, OWN, allow_private_registries=kwargs.pop("allow", False),
                   resolver=FakeResolver(kwargs.pop("answers", {})), strict=False)


@pytest.mark.parametrize("image", ["3f", "3F", "sha256:3f", "SHA256:ab12", "0", "a" * 64, "cafe"])
def test_an_image_id_or_prefix_is_refused(image):
    assert "reads as an image id" in image_refusal(image, OWN)


@pytest.mark.parametrize("image", ["localhost/slw-svc_other-app:1", "slw-svc_other-app:1",
                                   "localhost/slw-keep-svc_own:1-app", "LOCALHOST/slw-svc_other-app"])
def test_another_services_build_is_refused(image):
    assert "built for another service" in image_refusal(image, OWN)


@pytest.mark.parametrize("image", ["busybox", "busybox:latest", "cafe:latest", "localhost/busybox:latest",
                                   f"localhost/slw-{OWN}-app:abc", "docker.io/library/redis@sha256:" + "a" * 64,
                                   "ghcr.io/acme/slw-svc_other-app:1", "scratch"])
def test_images_a_service_may_use(image):
    assert image_refusal(image, OWN) is None


def test_every_stage_and_every_from_is_read_with_arg_defaults():
    text = ("# syntax=docker/dockerfile:1\n"
            "ARG BASE=busybox\nARG TAG\nARG PREFIX=3\n"
            "FROM ${BASE}:${TAG:-latest} AS builder\n"
            "ENV PATH=/x:$PATH\n"
            "RUN echo it's fine \\\n  && echo more\n"
            "FROM builder\n"  # a stage of the file: not an image
            "COPY --from=builder /a /b\nCOPY --from=0 /a /b\n"
            "ENV X=localhost/slw-svc_other-web:1\nENV PREFIX=3\n"  # the stage's ENV (its ARG the base image may override)
            "COPY --chown=1:1 --from=$X /a /b\n"
            "RUN --mount=type=cache,target=/c --mount=type=bind,from=${PREFIX:-9}f,target=/x true\n"
            "FROM $PREFIX\n"  # FROM sees the global ARGs
            "from scratch\n")
    assert refs(text) == [(1, "syntax", "docker/dockerfile:1"), (5, "FROM", "busybox:latest"),
                          (14, "--from", "localhost/slw-svc_other-web:1"), (15, "--from", "3f"),
                          (16, "FROM", "3"), (17, "FROM", "scratch")]
    assert why(text).startswith("line 14 (COPY --chown=1:1 --from=$X /a /b): localhost/slw-svc_other-web:1 was built")


@pytest.mark.parametrize("text, line", [
    ("FROM 3f\n", 1),
    ("FROM busybox\nCOPY --from=sha256:ab /x /y\n", 2),
    ("FROM busybox\nRUN --mount=type=bind,from=ab,target=/x cat /x/etc/secret\n", 2),
    ("ARG B=ab\nFROM ${B}\n", 2),
    ("ARG B\nFROM ${B:-ab}\n", 2),
    ("ARG B=\nFROM ${B:-ab}\n", 2),
    ("ARG A=a\nARG B=${A}b\nFROM $B\n", 3),
    ("FROM busybox\nCOPY \\\n  # a comment inside the continuation\n\n  --from=ab /x /y\n", 2),
    ("# escape=`\nFROM busybox\nCOPY `\n  --from=ab /x /y\n", 3),
    ("FROM busybox AS one\nCOPY --from=1 /x /y\n", 2),  # no stage 1 before this one: an image id
    (("FROM busybox AS one\nCOPY --from=one /x /y\nCOPY --from=two /x /y\nFROM busybox AS two\n"
      "COPY --from=ab / /\n"), 5),
    ("FROM busybox\nONBUILD COPY --from=ab /x /y\n", 2),
    ("FROM localhost/slw-svc_other-web:1 AS ab\n", 1),
    ("\ufeffFROM slw-svc_other-web:1\n", 1),
    ("FROM --platform=$BUILDPLATFORM 3f AS build\n", 1),
    ("# syntax=3f\nFROM busybox\n", 1),
    ("FROM busybox\ncopy --FROM=ab /x /y\n", 2),
])
def test_the_refusal_names_the_line(text, line):
    assert why(text).startswith(f"line {line} ("), why(text)


def test_a_heredoc_body_is_not_a_stage_of_the_file():
    """BuildKit and Buildah read the body as text, a classic builder as instructions:
    a stage named only inside a heredoc is no stage, and a FROM there counts too."""
    text = "FROM busybox\nRUN <<EOF\nFROM busybox AS ab\nEOF\nCOPY --from=ab /x /y\n"
    assert why(text).startswith("line 5 (COPY --from=ab /x /y)")
    text = "FROM busybox\nRUN <<-EOT cat\n\tFROM 3f\n\tEOT\nRUN true\n"
    assert why(text).startswith("line 3 (FROM 3f)")
    assert why("FROM busybox AS ab\nRUN <<EOF\necho hi\nEOF\nFROM busybox\nCOPY --from=ab /x /y\n") is None


@pytest.mark.parametrize("text", [
    "FROM busybox\nCOPY . /app\n",
    "FROM busybox AS build\nRUN echo \"it's\" && echo $HOME\nFROM busybox\nCOPY --from=build /a /b\n",
    "ARG V=1.36\nFROM busybox:${V}\nARG V\nENV APP=/app PATH=/app/bin:$PATH\nRUN echo $V\n",
    "FROM scratch\nCOPY app /\n",
    f"FROM localhost/slw-{OWN}-base:abc\n",
    "FROM busybox AS b\nFROM busybox\nENV S=b\nCOPY --from=$S /x /y\n",
    "ARG TAG\nFROM busybox:${TAG:-latest}\n",  # an ARG without a default is unset: no build arguments are passed
    "FROM --platform=$BUILDPLATFORM busybox AS build\nFROM busybox\nCOPY --from=build /x /y\n",
    "FROM docker:24-dind\n",  # the image named docker, not a transport
    "FROM busybox\nRUN true \\\n\v\n",  # not a continuation into nothing: \v is a line of its own
    "# syntax=docker/dockerfile:1\n# escape=`\nFROM busybox\nRUN echo `\n  hi\n",
    "# check=skip=all\n# syntax=docker/dockerfile:1\nFROM busybox\n",
])
def test_files_that_pass(text):
    assert why(text) is None


@pytest.mark.parametrize("text, words", [
    ("# escape=x\nFROM busybox\n", "unknown escape character"),
    ("FROM busybox\nCOPY --from /x /y\n", "--from without ="),
    ("FROM busybox\nARG X\nCOPY --from=$X /x /y\n", "no value of $X"),  # the base image's ENV may give it
    ("FROM busybox\nENV X=$UNSET\nCOPY --from=$X /x /y\n", "no value of $X"),
    ("ARG B=busybox\nFROM ${B%box}\n", "cannot read the variable form"),
    ("FROM ${B\n", "unterminated"),
    ("FROM\n", "FROM names no image"),
    ("FROM busybox\nCOPY --from=\"ab /x /y\n", "unterminated quote"),
])
def test_a_file_that_cannot_be_read_is_refused(text, words):
    with pytest.raises(ContainerfileError, match="line"):
        references(text)
    assert words in why(text) and why(text).startswith("cannot be read"), why(text)


@pytest.mark.parametrize("reference, host", [
    ("busybox", None), ("library/redis:7", None), ("ghcr.io/acme/app", "ghcr.io"),
    ("127.0.0.1:5000/ops/billing:latest", "127.0.0.1:5000"), ("localhost/x", "localhost"),
    ("localhost:5000/x", "localhost:5000"), ("[::1]:5000/x", "[::1]:5000"), ("Intranet/x", "Intranet"),
])
def test_the_registry_host_follows_the_reference_grammar(reference, host):
    assert registry_host(reference) == host


def test_private_registries_are_refused_and_unresolved_names_accepted():
    lookups = {"registry.corp.example": ["10.1.2.3"], "public.example": ["93.184.216.34"]}
    resolve = lookups.get
    cases = {
        "127.0.0.1:5000/ops/billing:latest": "127.0.0.1 is a loopback address",
        "[::1]:5000/x": "::1 is a loopback address",
        "10.0.0.8/x:1": "10.0.0.8 is a private address",
        "169.254.169.254:80/x": "link-local",
        "registry.corp.example/team/app": "registry.corp.example resolves to 10.1.2.3",
    }
    for reference, words in cases.items():
        reason = registry_refusal(reference, resolve=resolve)
        assert reason and words in reason and "only public registries" in reason, (reference, reason)
    for fine in ("public.example/x", "nowhere.invalid/x", "busybox", "localhost/busybox:latest", "library/redis"):
        assert registry_refusal(fine, resolve=resolve) is None, fine
    assert "localhost resolves to 127.0.0.1" in registry_refusal("localhost:5000/x", resolve={"localhost": [
        "127.0.0.1"]}.get)
    text = "FROM registry.corp.example/team/base:1\n"
    assert why(text, answers=lookups).startswith("line 1 (FROM registry.corp.example/team/base:1): the registry")
    assert why(text, answers=lookups, allow=True) is None


def test_localhost_without_a_port_is_the_engines_own():
    assert engine_local("localhost/busybox:latest") and not engine_local("localhost:5000/busybox")
    assert not engine_local("busybox") and not engine_local("ghcr.io/x")


def test_the_setting():
    assert allow_private({}) is False and allow_private({"SLIPWAY_REGISTRY_ALLOW_PRIVATE": "1"}) is True
    with pytest.raises(ValueError, match="SLIPWAY_REGISTRY_ALLOW_PRIVATE"):
        allow_private({"SLIPWAY_REGISTRY_ALLOW_PRIVATE": "yes"})


# --- read as the engines read: white space, continuations, escape directives ----------------


@pytest.mark.parametrize("text, line", [
    ("FROM\x0cab\n", 1),  # the engines split words at [\t\v\f\r ]+
    ("FROM\x0bab\n", 1),
    ("from\x0c\x0b3f\n", 1),
    ("FROM busybox\nCOPY\x0c--from=ab /x /y\n", 2),
    ("FROM busybox\nONBUILD\x0cCOPY --from=ab /x /y\n", 2),
    ("FROM\u00a0ab\n", 1),  # not a separator for the engines (which then refuse the line): read both ways
])
def test_every_white_space_the_engines_split_at_separates_words(text, line):
    assert f"line {line}" in (why(text) or ""), why(text)


@pytest.mark.parametrize("after", ["\x0c", "\x0b", "\xa0", "\u2003", "\x1c"])
def test_a_line_continues_only_when_the_escape_ends_it_before_spaces_and_tabs(after):
    """``RUN true \\<form feed>`` does not continue for the engines: the next line is an
    instruction of its own."""
    text = f"FROM busybox\nRUN true \\{after}\nFROM ab\n"
    assert why(text).startswith("line 3 (FROM ab)"), why(text)
    assert why("FROM busybox\nRUN true \\ \t\nFROM ab\n") is None  # spaces and tabs: it continues


def test_a_line_of_a_space_python_knows_and_go_does_not_ends_a_continuation():
    """Go trims ``\\x1c`` from no line: inside a continuation such a line is text, and the
    instruction ends there."""
    assert why("FROM busybox\nRUN true \\\n\x1c\nFROM ab\n").startswith("line 4 (FROM ab)")


@pytest.mark.parametrize("text, line", [
    # Buildah honours escape on the first line only: the backslash reading shows line 5
    ("# syntax=docker/dockerfile:1\n# escape=`\nFROM busybox\nRUN echo `\nFROM ab\n", 5),
    ("# escape=`x\nFROM busybox\nRUN echo \\\nFROM ab\n", 4),  # an older parser takes the first character
])
def test_every_escape_character_an_engine_may_pick_is_read(text, line):
    assert why(text).startswith(f"line {line} ("), why(text)


# --- only image references --------------------------------------------------------------------


@pytest.mark.parametrize("image, words", [
    ("containers-storage:localhost/slw-svc_other-app:x", "not an image reference"),
    ("containers-storage:3f", "names the transport containers-storage:"),
    ("containers-storage:slw-svc_other-app", "names the transport containers-storage:"),
    ("docker://127.0.0.1:5000/x", "not an image reference"),
    ("oci-archive:/tmp/x.tar", "not an image reference"),
    ("oci-archive:x", "names the transport oci-archive:"),
    ("docker-archive:x", "names the transport docker-archive:"),
    ("dir:x", "names the transport dir:"),
    ("docker-daemon:busybox:latest", "not an image reference"),
    ("a\\b", "not an image reference"),  # the engines' shell takes the backslash off: ab
    ("'ab'", "not an image reference"),
    ("Busybox", "not an image reference"),
    ("busybox:", "not an image reference"),
    ("busybox@sha256:12", "not an image reference"),
    ("a" * 256, "not an image reference"),
    ("-x", "not an image reference"),
    ("localhost:port/x", "not an image reference"),
])
def test_only_a_reference_of_the_docker_grammar_is_an_image(image, words):
    assert words in image_refusal(image, OWN), image_refusal(image, OWN)
    assert why(f"FROM {image}\n").startswith("line 1 (FROM "), why(f"FROM {image}\n")
    assert why(f"FROM busybox\nCOPY --from={image} /x /y\n").startswith("line 2 ("), image


@pytest.mark.parametrize("image", ["docker:24-dind", "registry.example.com:5000/a/b_c__d-e.f:1.0-x",
                                   "[2001:db8::1]:5000/x", "Intranet/x", "localhost/busybox:latest",
                                   "redis:7@sha256:" + "a" * 64, "a/b/c/d"])
def test_references_of_the_grammar_are_images(image):
    assert image_refusal(image, OWN) is None


# --- variables: only values the file fixes --------------------------------------------------


@pytest.mark.parametrize("text, words", [
    ("FROM ${TARGETOS:+127.0.0.1:5000/}busybox\n", "no value of $TARGETOS (the engine gives it one)"),
    ("ARG TARGETOS=linux\nFROM ${TARGETOS:+ab}\n", "no value of $TARGETOS"),
    ("ARG TARGETARCH\nFROM busybox:$TARGETARCH\n", "no value of $TARGETARCH"),
    ("ARG B=${BUILDPLATFORM}x\nFROM busybox:$B\n", "no value of $B"),
    ("FROM ${NOWHERE:-busybox}\n", "no value of $NOWHERE"),  # not declared: the engines differ
    ("ARG B=busybox\nARG B\nFROM $B\n", "no value of $B"),  # declared again without a default
    ("FROM busybox\nARG S=b\nCOPY --from=$S /x /y\n", "no value of $S"),  # the base image's ENV overrides ARG
])
def test_a_variable_whose_value_the_file_does_not_fix_is_refused(text, words):
    assert words in why(text) and why(text).startswith("cannot be read"), why(text)


# --- cost: linear in the text, and bounded --------------------------------------------------


@pytest.mark.parametrize("text", [
    "# syntax=x" + " " * 200_000 + "y\nFROM busybox\n",
    "#" + " " * 200_000 + "syntax" + " " * 200_000 + "=x\nFROM busybox\n",
    "FROM " + "a-" * 150_000 + "a\n",
    "FROM " + "a" * 300_000 + "!\n",
    "FROM busybox\nRUN " + "<<" * 120_000 + "\n",
    "FROM busybox\nRUN <<\"" + "a" * 300_000 + "\n",
    "FROM busybox\nRUN <<" + " " * 300_000 + "!\n",
    "FROM busybox\nCOPY --from=\"" + "\\x" * 150_000 + "\" /x /y\n",
    "FROM busybox\nRUN true \\\n" + "\\\n" * 150_000 + "FROM ab\n",
    "FROM busybox\n" + "ARG A=" + "$A" * 150_000 + "\n",
    "FROM busybox\n" + "ENV " + "A=1 " * 70_000 + "\n",
    "\x0c" * 200_000 + "FROM busybox\n",
])
def test_crafted_texts_are_read_in_linear_time(text):
    assert len(text) >= 200_000
    why(text)  # answers (refused or not); the suite's timeout catches a regression


def test_variables_nested_deeper_than_the_bound_are_refused():
    assert "nested deeper than 16" in why("ARG A\nFROM " + "${A:-" * 70_000 + "x" + "}" * 70_000 + "\n")
    assert why("ARG A\nFROM " + "${A:-" * 16 + "busybox" + "}" * 16 + "\n") is None
    assert "nested deeper" in why("ARG A\nFROM " + "${A:-" * 18 + "busybox" + "}" * 18 + "\n")


def test_a_text_over_one_mib_is_not_read():
    text = "FROM busybox\n" + "# padding\n" * 110_000
    assert len(text.encode()) > 1024 * 1024
    assert "larger than 1024 KiB" in why(text)
    with pytest.raises(ContainerfileError, match="larger than 1024 KiB"):
        references("FROM busybox\n# " + "é" * 600_000)  # counted in bytes


# --- registries: one deadline for every lookup; at job time a name must resolve -------------


def test_at_job_time_a_registry_host_that_does_not_resolve_is_refused():
    text = "FROM nowhere.invalid/team/base:1\n"
    assert why(text) is None  # at create: accepted (the lookup answers nothing)
    strict = refusal(text, OWN, allow_private_registries=False, resolver=FakeResolver(), strict=True)
    assert strict.startswith("line 1 (FROM nowhere.invalid/team/base:1): the registry host nowhere.invalid of")
    assert "does not resolve" in strict
    assert refusal(text, OWN, allow_private_registries=True, resolver=FakeResolver(), strict=True) is None
    assert "does not resolve" in registry_refusal("nowhere.invalid:5000/x", resolve=lambda host: None, strict=True)
    assert registry_refusal("10.0.0.8/x", resolve=lambda host: None, strict=True).endswith(
        "10.0.0.8 is a private address; only public registries are allowed")


def test_the_deploy_job_pulls_nothing_from_a_registry_host_that_does_not_resolve():
    """A name that does not resolve passes the plan's check (as at create), and is judged
    strictly when its image would be pulled: absent, the job fails naming it; present (a
    redeploy's refresh), the copy the engine has is deployed and nothing is pulled."""
    from core.panel.compose import parse_compose
    from core.panel.deploy_job import _image, registries_refusal
    from tests.support.fakes import FakeRuntime

    plan = parse_compose("services:\n  a:\n    image: nowhere.invalid/x:1\n  b:\n    image: busybox\n")
    assert registries_refusal(plan, resolver=FakeResolver()) is None
    runtime = FakeRuntime()
    runtime.has_image = lambda image: False
    with pytest.raises(RuntimeError, match="the registry host nowhere.invalid of .* does not resolve"):
        _image(runtime, "nowhere.invalid/x:1", refresh=False, strict=True, resolver=FakeResolver())
    runtime.has_image = lambda image: True
    kept = _image(runtime, "nowhere.invalid/x:1", refresh=True, strict=True, resolver=FakeResolver())
    assert kept.startswith("not pulling nowhere.invalid/x:1") and "deploying the copy the engine has" in kept
    assert not [call for call in runtime.calls if call[0] == "pull_image"]
    assert _image(runtime, "nowhere.invalid/x:1", refresh=True, strict=False) is None  # allowed: pulled
    assert [call[0] for call in runtime.calls] == ["pull_image"]


def test_a_deploy_without_a_resolver_looks_nothing_up_and_says_so():
    """Core looks no name up itself: a deployer built without a resolver fails the pull
    of an image whose registry host needs a lookup, naming what it lacks."""
    from core.panel.deploy_job import _image
    from tests.support.fakes import FakeRuntime

    runtime = FakeRuntime()
    runtime.has_image = lambda image: False
    with pytest.raises(RuntimeError, match="cannot look up the registry host nowhere.invalid: this deploy worker "
                                           "has no resolver"):
        _image(runtime, "nowhere.invalid/x:1", refresh=False, strict=True)
