"""Test helpers: a scripted SPARQL HTTP server on 127.0.0.1 and entities in the Wikidata JSON dump format."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

EMPTY_RESULT = {"head": {"vars": ["x"]}, "results": {"bindings": []}}


def sparql_json(rows: list[dict[str, str]], variables: list[str] | None = None) -> bytes:
    """A SPARQL JSON result whose cells are URIs (values starting with http) or literals."""
    names = variables or sorted({k for r in rows for k in r})
    bindings = [
        {k: ({"type": "uri", "value": v} if v.startswith("http") else {"type": "literal", "value": v}) for k, v in r.items()}
        for r in rows
    ]
    return json.dumps({"head": {"vars": names}, "results": {"bindings": bindings}}).encode()


@dataclass
class Reply:
    status: int = 200
    body: bytes = json.dumps(EMPTY_RESULT).encode()
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    declared_length: int | None = None  # a Content-Length other than the body's: the connection drops mid-body
    drip_s: float = 0.0  # send the body one byte at a time, this long apart


@dataclass
class Seen:
    method: str
    query: str
    headers: dict[str, str]
    at: float


class ScriptedSparqlServer:
    """Answers each request with the next scripted ``Reply`` (the last one repeats); records requests."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.seen: list[Seen] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                params = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                server._answer(self, "GET", params.get("query", [""])[0])

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                params = urllib.parse.parse_qs(self.rfile.read(length).decode())
                server._answer(self, "POST", params.get("query", [""])[0])

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/sparql"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _answer(self, handler: BaseHTTPRequestHandler, method: str, query: str) -> None:
        with self._lock:
            self.seen.append(Seen(method, query, dict(handler.headers), time.monotonic()))
            reply = self.script.pop(0) if len(self.script) > 1 else (self.script[0] if self.script else Reply())
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        counted = True
        try:
            if reply.delay_s:
                time.sleep(reply.delay_s)
            # in flight until the reply starts: once the client can read it, it may send its next request
            # before this thread runs again, so counting longer would race that request
            with self._lock:
                self.in_flight -= 1
                counted = False
            handler.send_response(reply.status)
            handler.send_header("Content-Type", "application/sparql-results+json")
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(reply.declared_length or len(reply.body)))
            handler.end_headers()
            if reply.drip_s:
                for byte in reply.body:
                    handler.wfile.write(bytes([byte]))
                    handler.wfile.flush()
                    time.sleep(reply.drip_s)
            else:
                handler.wfile.write(reply.body)
            if reply.declared_length:
                handler.close_connection = True
        finally:
            if counted:
                with self._lock:
                    self.in_flight -= 1


def item_entity(qid: str, label: str | None, claims: dict[str, list[dict]], sitelinks: dict | None = None) -> dict:
    """An entity in the Wikidata JSON dump format."""
    return {
        "type": "item",
        "id": qid,
        "labels": {"en": {"language": "en", "value": label}} if label else {},
        "claims": claims,
        "sitelinks": sitelinks or {},
    }


def statement(subject: str, pid: str, value, rank: str = "normal", n: int = 0, snaktype: str = "value") -> dict:
    """A statement in the dump format; ``value`` is "Q.." (item), a str, or a (kind, dict) datavalue."""
    if snaktype != "value":
        snak = {"snaktype": snaktype, "property": pid, "datatype": "wikibase-item"}
    elif isinstance(value, str) and value[:1] == "Q" and value[1:].isdigit():
        snak = {
            "snaktype": "value",
            "property": pid,
            "datatype": "wikibase-item",
            "datavalue": {"type": "wikibase-entityid", "value": {"entity-type": "item", "numeric-id": int(value[1:]), "id": value}},
        }
    elif isinstance(value, str):
        snak = {"snaktype": "value", "property": pid, "datatype": "string", "datavalue": {"type": "string", "value": value}}
    else:
        kind, payload = value
        datatype = {"globecoordinate": "globe-coordinate"}.get(kind, kind)
        snak = {"snaktype": "value", "property": pid, "datatype": datatype, "datavalue": {"type": kind, "value": payload}}
    return {"mainsnak": snak, "type": "statement", "id": f"{subject}${pid}-{n}-{rank}", "rank": rank}


def time_statement(subject: str, pid: str, time: str, precision: int, n: int = 0) -> dict:
    """A Gregorian time statement in the dump format."""
    value = {"time": time, "precision": precision, "timezone": 0, "calendarmodel": "http://www.wikidata.org/entity/Q1985727"}
    return statement(subject, pid, ("time", value), n=n)


def write_jsonl(path: Path, entities: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entities), encoding="utf-8")
    return path


def in_process_client(tmp_path: Path, entities: list[dict]):
    """An InProcessClient over an in-memory store holding ``entities`` mapped to RDF."""
    from pyoxigraph import RdfFormat, Store

    from reasonvqa.knowledge.mirror import InProcessClient, write_ntriples

    source = write_jsonl(tmp_path / "entities.jsonl", entities)
    triples = tmp_path / "entities.nt"
    write_ntriples(source, triples)
    store = Store()
    store.load(path=str(triples), format=RdfFormat.N_TRIPLES)
    return InProcessClient(store)
