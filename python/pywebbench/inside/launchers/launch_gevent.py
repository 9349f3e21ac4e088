"""Start a WSGI app on gevent.pywsgi (greenlets; the stdlib is monkey-patched first, so a
blocking app yields on I/O and sleep).

Pitfall handled: pywsgi writes headers and body in two sends; without TCP_NODELAY every
keep-alive request waits ~40 ms for the client's delayed ACK. TCP_NODELAY is set on every
accepted connection here.
"""

from gevent import monkey

monkey.patch_all()

from gevent import pywsgi  # noqa: E402

from launch_common import bind_socket, load_app, nodelay, parse_args, serve_workers  # noqa: E402


class NoDelayWSGIServer(pywsgi.WSGIServer):
    """pywsgi's server with Nagle's algorithm off on accepted sockets."""

    def handle(self, sock, address):
        nodelay(sock)
        return super().handle(sock, address)


def main():
    args = parse_args("gevent.pywsgi launcher")
    app = load_app(args.app)
    sock = bind_socket(args.host, args.port, args.backlog)

    def serve():
        NoDelayWSGIServer(sock, app, log=None).serve_forever()

    serve_workers(args.workers, serve)


if __name__ == "__main__":
    main()
