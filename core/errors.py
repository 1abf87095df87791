"""Domain errors. The app maps each one to the error format of the API that raised it."""


class DomainError(Exception):
    """Base of every error a use case raises on purpose."""

    def __init__(self, message: str, *, fields: dict | None = None):
        super().__init__(message)
        self.message = message
        self.fields = fields or {}


class NotFound(DomainError):
    """The thing does not exist, or the caller may not know that it does."""


class Conflict(DomainError):
    """The request is valid but the current state forbids it."""


class Invalid(DomainError):
    """A value the caller sent is not acceptable; ``fields`` names which and why."""


class Forbidden(DomainError):
    """The caller is known but lacks the right to do this."""


class Unauthorized(DomainError):
    """The caller could not be identified."""
