"""The ASGI entry point for any server: ``uvicorn app.asgi:app``.

Slipway's logging is installed here too, not only by ``slipway serve``: one JSON (or text)
line per record, and uvicorn's own access line switched off, since it carries the query
string (a WebSocket may authenticate with ``?api_key=``) and no request id."""
import logging.config

from app.config import Config
from app.factory import create_app
from app.http.observability.logs import log_config

# No formatter here shows a record's thread or process: not looking them up for every
# record (the logging HOWTO's "Optimization") saves a little on every request's access line.
logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False

_config = Config.from_env()
logging.config.dictConfig(log_config(_config.log_format))
app = create_app(_config)
