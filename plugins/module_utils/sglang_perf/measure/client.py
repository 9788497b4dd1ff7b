# -*- coding: utf-8 -*-
"""HTTP plumbing for the engine: plain ``http.client`` (stdlib only, no proxies), JSON GETs and
server-sent-event streams with connect / first-token / stall timeouts."""
from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from urllib.parse import urlsplit


class ConfigError(ValueError):
    """A bad option value. ``option`` names it (module option spelling)."""

    def __init__(self, option, message):
        ValueError.__init__(self, "%s: %s" % (option, message))
        self.option = option
        self.message = message


class MeasureError(RuntimeError):
    """The server could not be measured at all (unreachable, auth, not SGLang, all failed)."""


class RequestError(Exception):
    """One request failed. ``kind`` is a short category used in counts and messages."""

    def __init__(self, kind, message):
        Exception.__init__(self, message)
        self.kind = kind
        self.message = message


def parse_base_url(url):
    """Validate ``url`` and return (scheme, host, port, path prefix)."""
    if not isinstance(url, str) or not url:
        raise ConfigError("url", "a base URL such as http://127.0.0.1:30000 is required")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("url", "expected http://HOST[:PORT] or https://HOST[:PORT], got %r" % url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ConfigError("url", "invalid port in %r" % url)
    if parts.query or parts.fragment:
        raise ConfigError("url", "a base URL takes no query or fragment, got %r" % url)
    return parts.scheme, parts.hostname, port, parts.path.rstrip("/")


class Endpoint(object):
    """A base URL plus credentials; makes connections and requests against it."""

    def __init__(self, url, api_key=None, connect_timeout=5.0, validate_certs=True):
        self.url = url.rstrip("/")
        self.scheme, self.host, self.port, self.prefix = parse_base_url(url)
        self.api_key = api_key
        self.connect_timeout = float(connect_timeout)
        self._ssl = None
        if self.scheme == "https":
            self._ssl = ssl.create_default_context()
            if not validate_certs:
                self._ssl.check_hostname = False
                self._ssl.verify_mode = ssl.CERT_NONE

    def headers(self, body=False):
        h = {"Accept": "application/json, text/event-stream", "User-Agent": "sglang-bench"}
        if body:
            h["Content-Type"] = "application/json"
        if self.api_key:
            h["Authorization"] = "Bearer " + self.api_key
        return h

    def connect(self):
        """An open connection, or RequestError('connect', ...)."""
        if self._ssl is not None:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.connect_timeout,
                                               context=self._ssl)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.connect_timeout)
        try:
            conn.connect()
        except socket.timeout:
            conn.close()
            raise RequestError("connect", "no connection to %s:%s within %.1fs"
                               % (self.host, self.port, self.connect_timeout))
        except (OSError, ssl.SSLError) as e:
            conn.close()
            raise RequestError("connect", "cannot connect to %s:%s: %s" % (self.host, self.port, e))
        return conn

    def _request(self, method, path, timeout, body=None, limit=4 * 1024 * 1024):
        """One request, not streamed: (status, body bytes, at most ``limit``). Connection problems
        and a timeout raise RequestError naming the method and path."""
        conn = self.connect()
        try:
            conn.sock.settimeout(timeout)
            data = None if body is None else json.dumps(body).encode("utf-8")
            conn.request(method, self.prefix + path, body=data, headers=self.headers(body=body is not None))
            resp = conn.getresponse()
            return resp.status, resp.read(limit)
        except socket.timeout:
            raise RequestError("timeout", "%s %s: no answer within %.1fs" % (method, path, timeout))
        except (OSError, http.client.HTTPException) as e:
            raise RequestError("protocol", "%s %s: %s" % (method, path, e or type(e).__name__))
        finally:
            conn.close()

    def get(self, path, timeout=10.0):
        """GET ``path``: (status, body bytes). Connection problems raise RequestError."""
        return self._request("GET", path, timeout)

    def post_json(self, path, body, timeout=60.0):
        """POST ``body`` as JSON to ``path``, not streamed: (status, decoded JSON or None, raw
        excerpt). Connection problems and a timeout raise RequestError."""
        status, raw = self._request("POST", path, timeout, body, limit=16 * 1024 * 1024)
        try:
            return status, json.loads(raw.decode("utf-8")), excerpt(raw)
        except (ValueError, UnicodeDecodeError):
            return status, None, excerpt(raw)

    def get_json(self, path, timeout=10.0):
        """GET ``path`` and decode JSON: (status, object or None)."""
        status, raw = self.get(path, timeout)
        try:
            return status, json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return status, None


def excerpt(raw, limit=300):
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


class SSEStream(object):
    """One streamed POST. Iterate ``events()`` for (arrival time, decoded JSON or the string
    '[DONE]'). Enforces the first-token deadline until ``got_first_token()`` is called, then the
    stall timeout between reads. ``abort()`` may be called from another thread."""

    def __init__(self, endpoint, path, body, first_token_timeout, stall_timeout):
        self.endpoint = endpoint
        self.path = path
        self.first_deadline = None
        self.first_token_timeout = float(first_token_timeout)
        self.stall_timeout = float(stall_timeout)
        self.aborted = None
        self.conn = None
        self.sock = None  # kept: http.client drops conn.sock once a response says it will close
        self._first = False
        self._body = json.dumps(body).encode("utf-8")

    def abort(self, reason):
        self.aborted = reason
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def got_first_token(self):
        if not self._first:
            self._first = True
            self._settimeout(self.stall_timeout)

    def _settimeout(self, value):
        if self.sock is not None:
            self.sock.settimeout(max(value, 0.001))

    def open(self):
        """Connect and send; returns the send time (perf_counter)."""
        self.conn = self.endpoint.connect()
        self.sock = self.conn.sock
        self.first_deadline = time.perf_counter() + self.first_token_timeout
        self._settimeout(self.first_token_timeout)
        t_send = time.perf_counter()
        try:
            self.conn.request("POST", self.endpoint.prefix + self.path, body=self._body,
                              headers=self.endpoint.headers(body=True))
        except (OSError, http.client.HTTPException) as e:
            raise self._wrap(e, "sending the request")
        return t_send

    def _wrap(self, exc, doing):
        if self.aborted:
            return RequestError("aborted", self.aborted)
        if isinstance(exc, socket.timeout):
            if not self._first:
                return RequestError("first_token_timeout",
                                    "no token within %.1fs (first-token timeout) while %s"
                                    % (self.first_token_timeout, doing))
            return RequestError("stall", "stream stalled: nothing for %.1fs (stall timeout)"
                                % self.stall_timeout)
        return RequestError("connection", "connection lost while %s: %s"
                            % (doing, exc or type(exc).__name__))

    def events(self):
        try:
            resp = self.conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            raise self._wrap(e, "waiting for the response headers")
        if resp.status != 200:
            body = b""
            try:
                body = resp.read(65536)
            except (OSError, http.client.HTTPException):
                pass
            kind = "auth" if resp.status in (401, 403) else "http_%d" % resp.status
            raise RequestError(kind, "HTTP %d from POST %s: %s" % (resp.status, self.path,
                                                                 excerpt(body)))
        while True:
            if not self._first:
                self._settimeout(self.first_deadline - time.perf_counter())
            try:
                line = resp.readline()
            except (OSError, http.client.HTTPException, ValueError) as e:
                raise self._wrap(e, "reading the stream")
            now = time.perf_counter()
            if self.aborted:
                raise RequestError("aborted", self.aborted)
            if not line:
                return
            if not line.startswith(b"data:"):
                continue  # blank separators, "event:" names, comments
            payload = line[5:].strip()
            if payload == b"[DONE]":
                yield now, "[DONE]"
                continue
            try:
                yield now, json.loads(payload)
            except ValueError:
                raise RequestError("protocol", "undecodable stream event: %s" % excerpt(payload))

    def close(self):
        if self.conn is not None:
            self.conn.close()
        if self.sock is not None:
            self.sock.close()
