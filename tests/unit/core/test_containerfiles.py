"""Which images a build reads (core.panel.containerfiles): every FROM and --from of every
stage, ARG defaults applied, stages of the same file left out; the image rule a compose
``image:`` follows; the registry rule (a name lookup handed in, no network)."""
from __future__ import annotations

import pytest

from core.panel.containerfiles import (ContainerfileError, allow_private, engine_local, image_refusal, references,
                                       refusal, registry_host, registry_refusal)

OWN = "svc_own"


def refs(text):
    return [(r.line, r.kind, r.image) for r in references(text)]


def why(text, **kwargs):
    return refusal(text, OWN, allow_private_registries=kwargs.pop("allow", False),
                   resolve=kwargs.pop("resolve", lambda host: None))


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
            "ARG X=localhost/slw-svc_other-web:1\nARG PREFIX\n"  # the global default, in this stage
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
    "FROM busybox AS b\nFROM busybox\nARG S=b\nCOPY --from=$S /x /y\n",
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
    assert why(text, resolve=resolve).startswith("line 1 (FROM registry.corp.example/team/base:1): the registry")
    assert why(text, resolve=resolve, allow=True) is None


def test_localhost_without_a_port_is_the_engines_own():
    assert engine_local("localhost/busybox:latest") and not engine_local("localhost:5000/busybox")
    assert not engine_local("busybox") and not engine_local("ghcr.io/x")


def test_the_setting():
    assert allow_private({}) is False and allow_private({"SLIPWAY_REGISTRY_ALLOW_PRIVATE": "1"}) is True
    with pytest.raises(ValueError, match="SLIPWAY_REGISTRY_ALLOW_PRIVATE"):
        allow_private({"SLIPWAY_REGISTRY_ALLOW_PRIVATE": "yes"})
