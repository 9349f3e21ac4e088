"""Start a WSGI app on Twisted Web's WSGIResource (reactor for I/O, the app runs on the
reactor's thread pool of ``--threads`` threads)."""

import socket

from launch_common import bind_socket, load_app, parse_args, serve_workers


def main():
    args = parse_args("twisted WSGI launcher")
    app = load_app(args.app)
    sock = bind_socket(args.host, args.port, args.backlog)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET

    def serve():
        # Imported after the fork: the reactor's epoll descriptor must not be shared.
        from twisted.internet import reactor
        from twisted.web import server
        from twisted.web.wsgi import WSGIResource

        class QuietSite(server.Site):
            """A Site without access logging."""

            def log(self, request):
                pass

        reactor.suggestThreadPoolSize(args.threads)
        site = QuietSite(WSGIResource(reactor, reactor.getThreadPool(), app))
        reactor.adoptStreamPort(sock.fileno(), family, site)
        reactor.run()

    serve_workers(args.workers, serve)


if __name__ == "__main__":
    main()
