"""The container's health check: exit status 0 when the Slipway in this container answers.

It asks GET /healthz and wants 200. A server that has no /healthz (404) is asked for its
partner contract, GET /v1/openapi.yaml, instead. Standard library only (no curl needed).
Usage: python3 healthcheck.py [PORT]   (default 8000)
"""
import sys
import urllib.error
import urllib.request


def answers(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=4) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def main() -> int:
    base = f"http://127.0.0.1:{sys.argv[1] if len(sys.argv) > 1 else '8000'}"
    try:
        status = answers(f"{base}/healthz")
        if status == 404:
            status = answers(f"{base}/v1/openapi.yaml")
    except OSError as error:
        print(f"unhealthy: {error}")
        return 1
    print("healthy" if status == 200 else f"unhealthy: HTTP {status}")
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
