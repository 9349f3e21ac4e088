"""Start a WSGI app on meinheld (picoev + greenlets, C HTTP parser; one thread per process).

Pitfalls handled: standalone meinheld logs every request (access logger switched off here)
and has keep-alive off by default (switched on here, ``--keepalive`` seconds).
"""

from meinheld import server

from launch_common import bind_socket, load_app, parse_args, serve_workers


def main():
    args = parse_args("meinheld launcher", options={"--keepalive": int})
    app = load_app(args.app)
    sock = bind_socket(args.host, args.port, args.backlog)

    def serve():
        server.set_access_logger(None)
        server.set_keepalive(args.keepalive)
        server.set_backlog(args.backlog)
        server.set_listen_socket(sock.fileno())
        server.run(app)

    serve_workers(args.workers, serve)


if __name__ == "__main__":
    main()
