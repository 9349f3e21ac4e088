"""Start a WSGI app on eventlet.wsgi (green threads; the stdlib is monkey-patched first)."""

import eventlet

eventlet.monkey_patch()

import eventlet.wsgi  # noqa: E402

from launch_common import bind_socket, load_app, parse_args, serve_workers  # noqa: E402


def main():
    args = parse_args("eventlet launcher", options={"--max-greenthreads": int})
    app = load_app(args.app)
    raw = bind_socket(args.host, args.port, args.backlog)
    sock = eventlet.green.socket.socket(fileno=raw.detach())

    def serve():
        eventlet.wsgi.server(
            sock, app, log_output=False, max_size=args.max_greenthreads, keepalive=True, debug=False
        )

    serve_workers(args.workers, serve)


if __name__ == "__main__":
    main()
