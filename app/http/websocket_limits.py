"""The size of a WebSocket client message: at most ``MAX_MESSAGE`` bytes (64 KiB) on every
socket (``/api/ws``, log following); a larger one closes the socket with 1009 (message too
big).

``slipway serve`` tells uvicorn (``ws_max_size``), which refuses such a message before
reading it whole. ``limit_messages`` holds the same line in the app, for servers started
another way (``uvicorn app.asgi:app`` reads up to 16 MiB by default): the message is
dropped, the socket closed with 1009, and the handler sees the client gone."""
from __future__ import annotations

MAX_MESSAGE = 64 * 1024  # bytes of one client message (text as UTF-8)
MESSAGE_TOO_BIG = 1009
REASON = f"message too big: at most {MAX_MESSAGE} bytes"


def message_size(message: dict) -> int:
    data = message.get("bytes")
    if data is not None:
        return len(data)
    text = message.get("text") or ""
    # UTF-8 takes at most 4 bytes a character: a short text is not encoded to be measured
    return len(text) if len(text) * 4 <= MAX_MESSAGE else len(text.encode("utf-8", "surrogatepass"))


def limit_messages(receive, send):
    """``receive`` and ``send`` of a WebSocket whose client messages may be ``MAX_MESSAGE``
    bytes at most: a larger one closes the socket with 1009 and reads as the client's
    disconnect; what the app sends after that is dropped (the socket is closed)."""
    closed = False

    async def limited_receive():
        nonlocal closed
        message = await receive()
        if message.get("type") == "websocket.receive" and message_size(message) > MAX_MESSAGE:
            if not closed:
                closed = True
                await send({"type": "websocket.close", "code": MESSAGE_TOO_BIG, "reason": REASON})
            return {"type": "websocket.disconnect", "code": MESSAGE_TOO_BIG, "reason": REASON}
        return message

    async def limited_send(message):
        nonlocal closed
        if closed:
            return
        if message.get("type") == "websocket.close":
            closed = True
        await send(message)

    return limited_receive, limited_send
