"""Background work inside the server: the loop (``loop``) and its tasks: deploy and backup
jobs, the billing recompute and the route file."""
