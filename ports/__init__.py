"""Ports: the hook specifications and the interfaces the core needs from the outside.

``hookimpl`` is the one marker plugins use::

    from ports import hookimpl

    @hookimpl
    def register_deploy_methods():
        return [MyDeployMethod()]
"""
import pluggy

PROJECT = "slipway"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["PROJECT", "hookimpl", "hookspec"]
