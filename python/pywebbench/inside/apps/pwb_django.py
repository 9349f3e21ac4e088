"""pywebbench workloads in Django (WSGI), configured in this one module: ``pwb_django:app``.

None of Django's middleware (as in TechEmpower's Django test), no database layer: fortunes use
the same client code as the other frameworks (psycopg or sqlite3). Runs inside a stack venv.

One middleware of our own, :func:`content_length`: Django sets no Content-Length itself (its
CommonMiddleware would). Without it the framing is left to the server: most servers chunk
the body, but uWSGI's HTTP/1.1 socket sends neither length nor chunks and keeps the
connection open, so a client only sees the end of the body when uWSGI's socket timeout (4 s)
closes the connection (``pywebbench verify`` then never saw uwsgi+django get ready).
"""

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="pywebbench-not-secret",
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["*"],
    MIDDLEWARE=[__name__ + ".content_length"],
    INSTALLED_APPS=[],
    DATABASES={},
    USE_TZ=True,
    DATA_UPLOAD_MAX_MEMORY_SIZE=None,
    LOGGING_CONFIG=None,
)
django.setup()

from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import HttpResponse, JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.http import require_GET, require_POST  # noqa: E402

import pwb_common as c  # noqa: E402


def content_length(get_response):
    """Middleware: set Content-Length on every non-streaming response (404s and 405s too)."""

    def middleware(request):
        response = get_response(request)
        if not response.streaming and not response.has_header("Content-Length"):
            response["Content-Length"] = str(len(response.content))
        return response

    return middleware


def _guard(view):
    def wrapper(request):
        try:
            return view(request)
        except c.BadParameter as exc:
            return HttpResponse(str(exc), status=400, content_type=c.TEXT)
        except c.ServiceNotConfigured as exc:
            return HttpResponse(str(exc), status=503, content_type=c.TEXT)

    return wrapper


@require_GET
def hello(request):
    return HttpResponse(c.HELLO, content_type=c.TEXT)


@require_GET
def json_(request):
    return JsonResponse(c.MESSAGE)


@require_GET
@_guard
def cpu(request):
    return HttpResponse(c.cpu_body(c.cpu_n(request.GET.get("n"))), content_type=c.TEXT)


@require_GET
def environ(request):
    return HttpResponse(c.render_environ("WSGI environ", request.META), content_type=c.HTML)


@require_GET
@_guard
def redis_(request):
    return HttpResponse(c.redis_page(), content_type=c.HTML)


@require_GET
@_guard
def fortunes(request):
    return HttpResponse(c.fortunes_page(), content_type=c.HTML)


@require_GET
@_guard
def io(request):
    ms = c.io_ms(request.GET.get("ms"))
    c.io_sleep(ms)
    return HttpResponse(c.io_body(ms), content_type=c.TEXT)


@require_POST
def upload(request):
    return JsonResponse(c.upload_result(request.body))


urlpatterns = [
    path("hello", hello),
    path("json", json_),
    path("cpu", cpu),
    path("environ", environ),
    path("redis", redis_),
    path("fortunes", fortunes),
    path("io", io),
    path("upload", upload),
]

app = application = get_wsgi_application()
