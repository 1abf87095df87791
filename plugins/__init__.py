"""Built-in plugins. Each subpackage is a pluggy plugin found through the ``slipway``
entry-point group, registered exactly the way a hosting company's own package is."""
