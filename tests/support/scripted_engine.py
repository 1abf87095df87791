"""A container runtime that answers from a script, for deploy-job tests."""
from __future__ import annotations

from core.panel.containers import SERVICE_LABEL
from ports.runtime import ContainerState


class ScriptedEngine:
    """Keeps containers in a dict; ``on_run`` runs after each container is created."""

    def __init__(self):
        self.containers_by_id, self.on_run, self.removed_services = {}, None, []

    def has_image(self, image):
        return True

    def create_network(self, name, labels):
        pass

    def create_volume(self, name, labels):
        pass

    def run(self, spec):
        cid = f"c{len(self.containers_by_id)}"
        self.containers_by_id[cid] = ContainerState(cid, spec.name, "running", True, None, {}, dict(spec.labels))
        if self.on_run:
            self.on_run(spec)
        return cid

    def containers(self, service_id):
        return [c for c in self.containers_by_id.values() if c.labels.get(SERVICE_LABEL) == service_id]

    def remove_container(self, cid):
        self.containers_by_id.pop(cid, None)

    def image_id(self, image):
        return "sha256:" + "0" * 64

    def tag_image(self, image, tag):
        pass

    def remove_image(self, image):
        pass

    def remove_network(self, name):
        pass

    def stop(self, cid, timeout=10):
        pass

    def remove_service(self, service_id):
        self.removed_services.append(service_id)
        for c in self.containers(service_id):
            del self.containers_by_id[c.id]
