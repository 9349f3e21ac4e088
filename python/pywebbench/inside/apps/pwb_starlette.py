"""pywebbench workloads in Starlette (ASGI): ``pwb_starlette:app``. Runs inside a stack venv."""

from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute

import pwb_common as c


async def hello(request):
    return Response(c.HELLO, media_type=c.TEXT)


async def json_(request):
    return JSONResponse(c.MESSAGE)


async def cpu(request):
    return Response(c.cpu_body(c.cpu_n(request.query_params.get("n"))), media_type=c.TEXT)


async def environ(request):
    return Response(c.render_environ("ASGI scope", request.scope), media_type=c.HTML)


async def redis_(request):
    return Response(await c.redis_page_async(), media_type=c.HTML)


async def fortunes(request):
    return Response(await c.fortunes_page_async(), media_type=c.HTML)


async def io(request):
    ms = c.io_ms(request.query_params.get("ms"))
    await c.io_sleep_async(ms)
    return Response(c.io_body(ms), media_type=c.TEXT)


async def upload(request):
    return JSONResponse(c.upload_result(await request.body()))


async def bad_parameter(request, exc):
    return Response(str(exc), status_code=400, media_type=c.TEXT)


async def no_service(request, exc):
    return Response(str(exc), status_code=503, media_type=c.TEXT)


app = Starlette(
    routes=[
        Route("/hello", hello),
        Route("/json", json_),
        Route("/cpu", cpu),
        Route("/environ", environ),
        Route("/redis", redis_),
        Route("/fortunes", fortunes),
        Route("/io", io),
        Route("/upload", upload, methods=["POST"]),
        WebSocketRoute("/ws-echo", c.echo_websocket),
    ],
    exception_handlers={c.BadParameter: bad_parameter, c.ServiceNotConfigured: no_service},
)
application = app
