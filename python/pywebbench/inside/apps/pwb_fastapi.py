"""pywebbench workloads in FastAPI (ASGI): ``pwb_fastapi:app``. Runs inside a stack venv.

Idiomatic FastAPI: typed, validated query parameters (422 on bad input, FastAPI's rule),
dicts serialised by FastAPI for json and upload.
"""

from fastapi import FastAPI, Query, Request, WebSocket
from fastapi.responses import Response

import pwb_common as c

app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)


@app.exception_handler(c.ServiceNotConfigured)
async def _no_service(request, exc):
    return Response(str(exc), status_code=503, media_type=c.TEXT)


@app.get("/hello")
async def hello():
    return Response(c.HELLO, media_type=c.TEXT)


@app.get("/json")
async def json_():
    return c.MESSAGE


@app.get("/cpu")
async def cpu(n: int = Query(c.CPU_DEFAULT_N, ge=0, le=c.CPU_MAX_N)):
    return Response(c.cpu_body(n), media_type=c.TEXT)


@app.get("/environ")
async def environ(request: Request):
    return Response(c.render_environ("ASGI scope", request.scope), media_type=c.HTML)


@app.get("/redis")
async def redis_():
    return Response(await c.redis_page_async(), media_type=c.HTML)


@app.get("/fortunes")
async def fortunes():
    return Response(await c.fortunes_page_async(), media_type=c.HTML)


@app.get("/io")
async def io(ms: int = Query(c.IO_DEFAULT_MS, ge=0, le=c.IO_MAX_MS)):
    await c.io_sleep_async(ms)
    return Response(c.io_body(ms), media_type=c.TEXT)


@app.post("/upload")
async def upload(request: Request):
    return c.upload_result(await request.body())


@app.websocket("/ws-echo")
async def ws_echo(websocket: WebSocket):
    await c.echo_websocket(websocket)


application = app
