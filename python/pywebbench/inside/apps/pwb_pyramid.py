"""pywebbench workloads in Pyramid (WSGI): ``pwb_pyramid:app``. Runs inside a stack venv."""

from pyramid.config import Configurator
from pyramid.response import Response

import pwb_common as c


def hello(request):
    return Response(body=c.HELLO, content_type="text/plain", charset="utf-8")


def json_(request):
    return c.MESSAGE  # rendered by the "json" renderer


def cpu(request):
    body = c.cpu_body(c.cpu_n(request.GET.get("n")))
    return Response(body=body, content_type="text/plain", charset="utf-8")


def environ(request):
    body = c.render_environ("WSGI environ", request.environ)
    return Response(body=body, content_type="text/html", charset="utf-8")


def redis_(request):
    return Response(body=c.redis_page(), content_type="text/html", charset="utf-8")


def fortunes(request):
    return Response(body=c.fortunes_page(), content_type="text/html", charset="utf-8")


def io(request):
    ms = c.io_ms(request.GET.get("ms"))
    c.io_sleep(ms)
    return Response(body=c.io_body(ms), content_type="text/plain", charset="utf-8")


def upload(request):
    return c.upload_result(request.body)


def bad_parameter(exc, request):
    return Response(body=str(exc).encode(), status=400, content_type="text/plain", charset="utf-8")


def no_service(exc, request):
    return Response(body=str(exc).encode(), status=503, content_type="text/plain", charset="utf-8")


def make_app():
    with Configurator() as config:
        for name, view, method, renderer in (
            ("hello", hello, "GET", None),
            ("json", json_, "GET", "json"),
            ("cpu", cpu, "GET", None),
            ("environ", environ, "GET", None),
            ("redis", redis_, "GET", None),
            ("fortunes", fortunes, "GET", None),
            ("io", io, "GET", None),
            ("upload", upload, "POST", "json"),
        ):
            config.add_route(name, "/" + name)
            config.add_view(view, route_name=name, request_method=method, renderer=renderer)
        config.add_exception_view(bad_parameter, context=c.BadParameter)
        config.add_exception_view(no_service, context=c.ServiceNotConfigured)
        return config.make_wsgi_app()


app = application = make_app()
