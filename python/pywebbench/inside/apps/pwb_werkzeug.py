"""pywebbench workloads in plain Werkzeug (WSGI): ``pwb_werkzeug:app``. Runs inside a stack venv."""

import json

from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

import pwb_common as c


def hello(request):
    return Response(c.HELLO, content_type=c.TEXT)


def json_(request):
    return Response(json.dumps(c.MESSAGE), content_type=c.JSON)


def cpu(request):
    return Response(c.cpu_body(c.cpu_n(request.args.get("n"))), content_type=c.TEXT)


def environ(request):
    return Response(c.render_environ("WSGI environ", request.environ), content_type=c.HTML)


def redis_(request):
    return Response(c.redis_page(), content_type=c.HTML)


def fortunes(request):
    return Response(c.fortunes_page(), content_type=c.HTML)


def io(request):
    ms = c.io_ms(request.args.get("ms"))
    c.io_sleep(ms)
    return Response(c.io_body(ms), content_type=c.TEXT)


def upload(request):
    return Response(json.dumps(c.upload_result(request.get_data())), content_type=c.JSON)


URLS = Map(
    [
        Rule("/hello", endpoint=hello, methods=["GET"]),
        Rule("/json", endpoint=json_, methods=["GET"]),
        Rule("/cpu", endpoint=cpu, methods=["GET"]),
        Rule("/environ", endpoint=environ, methods=["GET"]),
        Rule("/redis", endpoint=redis_, methods=["GET"]),
        Rule("/fortunes", endpoint=fortunes, methods=["GET"]),
        Rule("/io", endpoint=io, methods=["GET"]),
        Rule("/upload", endpoint=upload, methods=["POST"]),
    ]
)


@Request.application
def app(request):
    try:
        endpoint, _args = URLS.bind_to_environ(request.environ).match()
        return endpoint(request)
    except HTTPException as exc:
        return exc
    except c.BadParameter as exc:
        return Response(str(exc), status=400, content_type=c.TEXT)
    except c.ServiceNotConfigured as exc:
        return Response(str(exc), status=503, content_type=c.TEXT)


application = app
