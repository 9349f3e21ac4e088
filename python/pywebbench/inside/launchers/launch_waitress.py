"""Start a WSGI app on waitress (pure-Python, asyncore-style loop + a thread pool).

Pitfall handled: waitress logs "Task queue depth is N" warnings to stderr under load (megabytes
per run, even with ``_quiet``); the ``waitress.queue`` logger is silenced here.
"""

import logging

import waitress

from launch_common import bind_socket, load_app, parse_args, serve_workers


def main():
    args = parse_args("waitress launcher", options={"--connection-limit": int})
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("waitress.queue").setLevel(logging.CRITICAL)
    logging.getLogger("waitress.queue").propagate = False
    app = load_app(args.app)
    sock = bind_socket(args.host, args.port, args.backlog, args.unix_socket)

    def serve():
        waitress.serve(
            app,
            sockets=[sock],
            threads=args.threads,
            backlog=args.backlog,
            connection_limit=args.connection_limit,
            _quiet=True,
        )

    serve_workers(args.workers, serve)


if __name__ == "__main__":
    main()
