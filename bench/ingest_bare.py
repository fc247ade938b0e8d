"""The bare endpoint the ingest benchmark compares `serve` with: Starlette, one upsert.

No bot logic: the body is decoded with `json.loads`, and every alert of the payload goes
into one table in ONE statement (`INSERT ... SELECT FROM unnest(...) ON CONFLICT DO
UPDATE`), committed before the 200. It is the floor of what "store an Alertmanager
notification durably" costs on this machine: what a webhook that did nothing else would
ingest. Run as its own process by `bench/ingest.py --peer`:

    .venv/bin/python bench/ingest_bare.py --port P --database-url URL [--connections 8]

The database must exist; the table is created if missing. GET /readyz answers 200 once the
connections are open.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import uvicorn
from sqlalchemy.engine import make_url
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

TABLE = """CREATE TABLE IF NOT EXISTS alerts (
    fingerprint text NOT NULL, starts_at timestamptz NOT NULL, status text NOT NULL,
    labels jsonb NOT NULL, annotations jsonb NOT NULL, ends_at timestamptz,
    last_received_at timestamptz NOT NULL DEFAULT now(), receive_count integer NOT NULL DEFAULT 1,
    PRIMARY KEY (fingerprint, starts_at))"""
UPSERT = """INSERT INTO alerts (fingerprint, starts_at, status, labels, annotations, ends_at)
SELECT f, s, st, l::jsonb, a::jsonb, NULLIF(e, '0001-01-01T00:00:00Z')::timestamptz
FROM unnest(%s::text[], %s::timestamptz[], %s::text[], %s::text[], %s::text[], %s::text[])
    AS t(f, s, st, l, a, e)
ON CONFLICT (fingerprint, starts_at) DO UPDATE SET status = excluded.status,
    ends_at = excluded.ends_at, annotations = excluded.annotations,
    last_received_at = now(), receive_count = alerts.receive_count + 1"""
TIMEOUT_S = 5.0


def app(dsn: str, connections: int) -> Starlette:
    pool: asyncio.Queue[psycopg.AsyncConnection[Any]] = asyncio.Queue()

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        opened = []
        for _ in range(connections):
            conn = await psycopg.AsyncConnection.connect(dsn, connect_timeout=5)
            opened.append(conn)
            pool.put_nowait(conn)
        async with opened[0].transaction():
            await opened[0].execute(TABLE)
        yield
        for conn in opened:
            await conn.close()

    async def alertmanager(request: Request) -> Response:
        payload = json.loads(await request.body())
        alerts = payload["alerts"]
        # The same alert twice in one statement would be refused by ON CONFLICT: keep the last.
        unique = {(a["fingerprint"], a["startsAt"]): a for a in alerts}.values()
        columns: list[list[str]] = [[], [], [], [], [], []]
        for alert in unique:
            values = (alert["fingerprint"], alert["startsAt"], alert["status"])
            values += (json.dumps(alert["labels"]), json.dumps(alert.get("annotations", {})))
            for column, value in zip(columns, (*values, alert.get("endsAt") or ""), strict=True):
                column.append(value)
        conn = await asyncio.wait_for(pool.get(), TIMEOUT_S)
        try:
            async with conn.transaction():
                await conn.execute(UPSERT, columns)
        finally:
            pool.put_nowait(conn)
        return JSONResponse({"alerts": {"stored": len(alerts)}})

    async def ready(_request: Request) -> Response:
        return PlainTextResponse("ok")

    routes = [Route("/webhooks/alertmanager", alertmanager, methods=["POST"])]
    return Starlette(routes=[*routes, Route("/readyz", ready)], lifespan=lifespan)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database-url", required=True, help="an existing scratch database")
    parser.add_argument("--connections", type=int, default=8, help="PostgreSQL connections (8)")
    args = parser.parse_args()
    url = make_url(args.database_url).set(drivername="postgresql")
    dsn = url.render_as_string(hide_password=False)
    server = app(dsn, args.connections)
    uvicorn.run(server, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
