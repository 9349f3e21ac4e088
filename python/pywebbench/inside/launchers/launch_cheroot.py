"""Start a WSGI app on cheroot (CherryPy's server: one acceptor + a pool of threads)."""

from cheroot import wsgi

from launch_common import bind_socket, load_app, parse_args, serve_workers


def main():
    args = parse_args("cheroot launcher")
    app = load_app(args.app)
    sock = bind_socket(args.host, args.port, args.backlog)

    class PreboundServer(wsgi.Server):
        """cheroot's server on the socket bound by the launcher (shared by all workers)."""

        def bind(self, family, type, proto=0):  # noqa: A002 - cheroot's signature
            self.socket = sock

    def serve():
        server = PreboundServer(
            (args.host, args.port),
            app,
            numthreads=args.threads,
            request_queue_size=args.backlog,
        )
        try:
            server.start()
        finally:
            server.stop()

    serve_workers(args.workers, serve)


if __name__ == "__main__":
    main()
